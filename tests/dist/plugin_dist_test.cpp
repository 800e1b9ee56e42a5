// The "tp.dist/2" service (plugin ABI 1.14) on 2 Gloo ranks. The driver (plugin_dist_driver.cpp)
// calls the table as a plugin does: all_reduce SUM/MEAN/MAX, integer tensors, the refusals (MEAN
// of integers, a tensor that requires grad, rows of another width on one rank: both ranks refuse
// alike and stay in step), all_gather with rows of different counts and its gradient against the
// single-process oracle, the identity inside an evaluation and for a single process, and a
// process of several ranks without a group. The host run trains SimCLR's NT-Xent loss with
// negatives gathered from both ranks (tests/fixtures/ntxent_loss): 2 ranks x 8 must give the
// weights of 1 process x 16, which a loss with local negatives (the only kind before 1.14) does not;
// its evaluations run 84 batches on rank 0 and 83 on rank 1, which the service's local calls in
// evaluations survive (without them both ranks waited for dist.timeout_s and failed: tried).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "free_port.h"
#include "integration/checkpoint_compare.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

std::string line_of(std::ifstream& in) {
  std::string line;
  REQUIRE(std::getline(in, line));
  return line;
}

double number_after(const std::string& line, std::size_t word) {
  std::istringstream in(line);
  std::string token;
  for (std::size_t i = 0; i <= word; ++i) in >> token;
  return std::stod(token);
}

tp::LoadedCheckpoint train(const std::string& name, const std::string& launch, const std::string& sets) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(launch + " --config tests/dist/plugin_dist.toml --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                      "' " + sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return tp::load_checkpoint(dir / "checkpoints" / "last.pt");
}

}  // namespace

TEST_CASE("tp.dist/2 as a plugin calls it: reductions, the gather's gradient, refusals, local calls") {
  const auto dir = tp::test::fresh_dir("plugin_dist");
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(tp::test::free_port());
  const std::string driver =
      std::string("'") + tp::test::build_dir() + "/bin/plugin_dist_driver' '" + dir.string() + "'";
  const auto run = tp::test::run_shell("RANK=1 LOCAL_RANK=1 " + env + " " + driver + " & RANK=0 LOCAL_RANK=0 " + env +
                                       " " + driver + "; first=$?; wait $!; second=$?; exit $((first + second))");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank ", rank);
    std::ifstream in(dir / ("rank" + std::to_string(rank) + ".txt"));
    std::string line = line_of(in);
    CHECK(line.starts_with("unattached status 3 tp.dist/2 this process is one of 2 ranks, but this command joined no "
                           "process group"));
    CHECK(line_of(in) == "place " + std::to_string(rank) + " 2 1");
    CHECK(line_of(in) == "sum 3.000000 -30.000000 status 0 ");
    CHECK(line_of(in) == "mean 1.500000 -15.000000 status 0 ");
    CHECK(line_of(in) == "max 2.000000 -10.000000 status 0 ");
    CHECK(line_of(in) == "int_sum status 0  3.000000 3.000000 3.000000");
    line = line_of(in);
    CHECK(line.starts_with("int_mean status 1 tp.dist/2 all_reduce: TP_REDUCE_MEAN of a Long tensor"));
    line = line_of(in);
    CHECK(line.starts_with("requires_grad status 1 tp.dist/2 all_reduce: the tensor requires grad"));
    CHECK(line_of(in) == std::string("gather_status status 0  offset ") + (rank == 0 ? "0" : "3"));
    line = line_of(in);
    CHECK(line.starts_with("gathered 5 1 "));
    CHECK(number_after(line, 3) == 0.0); // rank 0's 3 rows, then rank 1's 2, exactly
    line = line_of(in);
    MESSAGE("rank " << rank << ": all_gather's gradient vs one process on both ranks' rows: " << line);
    CHECK(number_after(line, 1) < 1e-12);
    CHECK(number_after(line, 2) > 1e-2); // a real gradient, not zeros on both sides
    line = line_of(in);
    CHECK(line.starts_with("mismatch status 1 tp.dist/2 all_gather: gather a plugin's rows over ranks (tp.dist/2 "
                           "all_gather): ranks gather rows of different shapes or dtypes: rank 0 has [1, 2] Double, "
                           "rank 1 has [1, 3] Double"));
    CHECK(line.ends_with(" null 1"));
    CHECK(line_of(in) == "local " + std::to_string(rank + 1.0) + " rows " + (rank == 0 ? "3" : "2") +
                             " offset 0 status 0  status 0 ");
    CHECK(line_of(in) == "after status 0  3.000000");
    CHECK(line_of(in) == "single 1 " + std::to_string(rank + 1.0) + " 2.000000 same 1 status 0  status 0 ");
  }
}

TEST_CASE("an NT-Xent loss gathering its negatives over 2 ranks x 8 trains like 1 process x 16") {
  const auto single = train("plugin_dist_single", "", "");
  const auto two = train("plugin_dist_two", "--nproc-per-node 2", "--set train.batch_size=8");
  CHECK(two.step == single.step);
  CHECK(single.step == 2 * 63); // 62 full batches + the 8-sample tail, per epoch
  const double gathered = tp::test::max_relative_difference(single, two);
  MESSAGE("NT-Xent, negatives gathered: 2 ranks x 8 vs 1 x 16: max relative difference " << gathered);
  CHECK(gathered < 1e-5);
  // The negative control: this rank's negatives only (all a plugin could do before ABI 1.14).
  const auto local =
      train("plugin_dist_local", "--nproc-per-node 2", "--set train.batch_size=8 --set loss.gather=false");
  const double without = tp::test::max_relative_difference(single, local);
  MESSAGE("NT-Xent, local negatives: 2 ranks x 8 vs 1 x 16: max relative difference " << without);
  CHECK(without > 1e-3);
}

TEST_CASE("train.on_oom = \"split\" does not split one rank alone when a plugin gathers over the ranks") {
  // Rank 1 runs out of memory in its second forward: split alone, it would make two gathers for
  // the other rank's one (a hang, or rows paired with another collective), so the run stops with
  // the out-of-memory report saying why it cannot split.
  const auto dir = tp::test::fresh_dir("plugin_dist_oom");
  std::string text = tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / "tests/dist/plugin_dist.toml");
  const auto model = text.find("[model]");
  text.replace(model, text.find("[loss]") - model,
               "[model]\ncomponent = \"org.torchhost.test.oom_model\"\nclasses = 16\nforward_limit = 4\noom_rank = 1\n"
               "fault_from_call = 2\n\n");
  std::ofstream(dir / "oom.toml") << text;
  const auto run = tp::test::run_host("--nproc-per-node 2 --config '" + (dir / "oom.toml").string() + "' --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" +
                                      (dir / "run").string() + "' --set train.batch_size=8 --set train.on_oom='\"split\"'");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("cannot recover: a plugin uses the ranks' collectives (tp.dist/2) in its training forwards") !=
        std::string::npos);
}

TEST_CASE("a rank whose whole batch was skipped stops, naming the batch, when a plugin gathers over the ranks") {
  // 16 images of 32 x 32 (text PPM) and 4 unreadable files, one sample per batch: some rank gets a
  // batch of none, runs no forward, and the other rank's gather would wait for it (a hang until
  // dist.timeout_s before, then a stall reported in the gather).
  const auto dir = tp::test::fresh_dir("plugin_dist_empty_batch");
  for (int c = 0; c < 2; ++c) {
    const auto folder = dir / "data" / (c == 0 ? "a" : "b");
    std::filesystem::create_directories(folder);
    for (int i = 0; i < 8; ++i) {
      std::ofstream image(folder / ("img" + std::to_string(i) + ".ppm"));
      image << "P3\n32 32\n255\n";
      for (int p = 0; p < 32 * 32; ++p) image << (p * 7 + i) % 256 << ' ' << 40 * c << ' ' << (p % 32) * 8 << '\n';
    }
    for (int i = 0; i < 2; ++i) std::ofstream(folder / ("bad" + std::to_string(i) + ".png")) << "not an image";
  }
  std::ofstream(dir / "run.toml")
      << "[run]\ndevice = \"cpu\"\nseed = 3\nthreads = 1\n[train]\nepochs = 1\nbatch_size = 1\n"
         "[optim]\nname = \"sgd\"\nlr = 0.01\n[data]\nnum_workers = 1\non_bad_sample = \"skip\"\nmax_bad_fraction = 1.0\n"
         "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"" + (dir / "data").string() + "\"\n"
         "[model]\ncomponent = \"org.torchhost.test.oom_model\"\nclasses = 16\n"
         "[loss]\ncomponent = \"org.torchhost.test.ntxent\"\n[eval]\nstrategy = \"no\"\n[checkpoint]\nsave_top_k = 0\n"
         "[progress]\nmode = \"off\"\n[plots]\nenabled = false\n[dist]\ntimeout_s = 30.0\n";
  const auto run = tp::test::run_host("--nproc-per-node 2 --config '" + (dir / "run.toml").string() + "' --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" +
                                      (dir / "run").string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("was skipped (data.on_bad_sample = \"skip\"), so this rank has no forward to run, but a "
                        "plugin uses the ranks' collectives (tp.dist/2)") != std::string::npos);
}
