// Data-parallel training is exact: 2 Gloo ranks x batch 16 train the same weights as 1 process
// x batch 32 (shuffled, short last batch, clipping, momentum, schedule), with and without
// gradient accumulation, with overlap off, through the built-in launcher, as two "nodes" on
// loopback and through torchrun; and the 2-rank evaluation of a checkpoint equals the 1-rank one.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/checkpoint_compare.h"
#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "free_port.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::max_relative_difference;

const std::string kConfig = "--config tests/dist/ddp.toml";

tp::LoadedCheckpoint train(const std::string& name, const std::string& launch, const std::string& sets) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(launch + " " + kConfig + " --output-dir '" + dir.string() + "' " + sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return tp::load_checkpoint(dir / "checkpoints" / "last.pt");
}

/// 1 process x 32, 2 epochs: the run every 2-rank variant must reproduce (trained once).
const tp::LoadedCheckpoint& single_run() {
  static const tp::LoadedCheckpoint single = train("ddp_single", "", "");
  return single;
}

}  // namespace

TEST_CASE("2 ranks x 16 train like 1 process x 32, with and without accumulation") {
  const auto& single = single_run();
  const auto two = train("ddp_two", "--nproc-per-node 2", "--set train.batch_size=16");
  CHECK(two.step == single.step);
  CHECK(single.step == 2 * 32); // 31 full batches + the 8-sample tail, per epoch
  const double plain = max_relative_difference(single, two);
  MESSAGE("2 ranks x 16 vs 1 x 32: max relative difference " << plain);
  CHECK(plain < 1e-5);
  // 2 ranks x (8 x 2 micro-batches): the last window is one 4-sample micro-batch per rank.
  const auto accum = train("ddp_two_accum", "--nproc-per-node 2",
                           "--set train.batch_size=8 --set train.grad_accum_steps=2 --set dist.bucket_mb=0.001");
  CHECK(accum.step == single.step);
  const double accumulated = max_relative_difference(single, accum);
  MESSAGE("2 ranks x 8 x accumulation 2 (tiny buckets) vs 1 x 32: max relative difference " << accumulated);
  CHECK(accumulated < 1e-5);
  // The weights moved: the comparison is not between untouched models.
  const auto short_run = train("ddp_short", "", "--set train.epochs=1");
  CHECK(max_relative_difference(single, short_run) > 1e-3);
}

TEST_CASE("with dist.overlap = false (buckets reduced after backward) the weights are the same") {
  const auto off = train("ddp_no_overlap", "--nproc-per-node 2",
                         "--set train.batch_size=16 --set dist.overlap=false --set dist.bucket_mb=0.1");
  const double difference = max_relative_difference(single_run(), off);
  MESSAGE("2 ranks x 16, overlap off, 0.1 MiB buckets vs 1 x 32: max relative difference " << difference);
  CHECK(difference < 1e-5);
}

TEST_CASE("two nodes on loopback (two launchers, --nnodes 2) train like 1 process x 32") {
  const auto dir = tp::test::fresh_dir("ddp_two_nodes");
  const std::string host = std::string("'") + tp::test::build_dir() + "/bin/host'";
  const std::string node = " --nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port " +
                           std::to_string(tp::test::free_port());
  const auto args = [&](int rank) {
    return " train " + kConfig + " --output-dir '" + (dir / ("node" + std::to_string(rank))).string() +
           "' --set train.batch_size=16";
  };
  // Node 1 starts first: its rank waits for the store node 0's rank 0 serves.
  const auto run = tp::test::run_shell(host + node + " --node-rank 1" + args(1) + " & NODE1=$!; " + host + node +
                                       " --node-rank 0" + args(0) + "; NODE0=$?; wait $NODE1; NODE1=$?; "
                                       "echo \"node exits $NODE0 $NODE1\"");
  INFO(run.output);
  REQUIRE(run.output.find("node exits 0 0") != std::string::npos);
  // Only global rank 0 (node 0) writes; node 1's rank 1 writes no checkpoint.
  CHECK_FALSE(std::filesystem::exists(dir / "node1" / "checkpoints" / "last.pt"));
  const auto two_nodes = tp::load_checkpoint(dir / "node0" / "checkpoints" / "last.pt");
  CHECK(two_nodes.step == single_run().step);
  const double difference = max_relative_difference(single_run(), two_nodes);
  MESSAGE("2 nodes x 1 rank x 16 vs 1 x 32: max relative difference " << difference);
  CHECK(difference < 1e-5);
}

TEST_CASE("torchrun --no-python host works") {
  const std::string torchrun = std::string(tp::test::source_dir()) + "/.venv/bin/torchrun";
  if (!std::filesystem::exists(torchrun)) {
    MESSAGE("skipped: no " << torchrun);
    return;
  }
  const auto single = train("ddp_single_tr", "", "--set train.epochs=1");
  const auto dir = tp::test::fresh_dir("ddp_torchrun");
  const auto run = tp::test::run_shell("'" + torchrun + "' --standalone --nproc-per-node=2 --no-python '" +
                                       tp::test::build_dir() + "/bin/host' " + kConfig + " --output-dir '" + dir.string() +
                                       "' --set train.batch_size=16 --set train.epochs=1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(max_relative_difference(single, tp::load_checkpoint(dir / "checkpoints" / "last.pt")) < 1e-5);
}

TEST_CASE("the 2-rank evaluation of a checkpoint equals the 1-rank evaluation") {
  const auto dir = tp::test::fresh_dir("ddp_eval");
  const std::string args = kConfig + " --output-dir '" + dir.string() + "'";
  REQUIRE(tp::test::run_host(args + " --set train.epochs=1").exit_code == 0);
  // 333 validation samples: the shards hold 167 and 166, and nothing is padded.
  const auto one = tp::test::run_host("eval " + args + " --checkpoint last");
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const std::string single = tp::test::read_text(dir / "eval_last.json");
  std::filesystem::remove(dir / "eval_last.json");
  const auto two = tp::test::run_host("--nproc-per-node 2 eval " + args + " --checkpoint last");
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  const std::string both = tp::test::read_text(dir / "eval_last.json");
  // The file keeps every digit: the accuracy (a ratio of counts) is exact; the loss is a float32
  // sum per shard, so the two-shard sum may differ in its last bits (measured: 8e-9 relative).
  CHECK(tp::test::json_number(both, "val/accuracy") == tp::test::json_number(single, "val/accuracy"));
  CHECK(tp::test::json_number(both, "val/loss") ==
        doctest::Approx(tp::test::json_number(single, "val/loss")).epsilon(1e-6));
  CHECK(both.substr(0, both.find("\"val/")) == single.substr(0, single.find("\"val/"))); // checkpoint, step, split
}

TEST_CASE("a micro-batch skipped whole on one rank: no hang, and the ranks stay equal") {
  // Unshuffled, rank r reads samples r, r + 2, ...: with micro-batches of 4 in windows of 2, rank
  // 0's second micro-batch is samples 8-14 (even), all failing, while rank 1's keeps sample 15. So
  // rank 0 ends each first window with an empty micro-batch that must still join the gradient
  // all-reduce. 2 ranks x 4 read the same samples per window as 1 process x 8.
  const std::string args = "--config tests/integration/c_regression.toml --plugin-dir '" +
                           std::string(tp::test::fixture_plugin_dir()) +
                           "' --set progress.mode=\"off\" --set train.epochs=2 --set data.train.size=64 "
                           "--set train.grad_accum_steps=2 --set data.shuffle=false --set data.on_bad_sample=\"skip\" "
                           "--set data.train.fail_first=8 --set data.train.fail_count=7 --set dist.timeout_s=30 "
                           "--set data.max_bad_fraction=1 "; // 7 of 64 bad, on purpose
  const auto run = [&](const std::string& name, const std::string& launch, const std::string& sets) {
    const auto dir = tp::test::fresh_dir(name);
    // `timeout`: before the fix the ranks ran different numbers of backward passes and waited
    // on each other's all-reduce.
    const auto result = tp::test::run_shell("timeout 300 '" + std::string(tp::test::build_dir()) + "/bin/host' " + launch +
                                            " " + args + "--output-dir '" + dir.string() + "' " + sets);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return dir;
  };
  const auto single = run("ddp_skip_single", "", "--set train.batch_size=8");
  const auto single_last = tp::load_checkpoint(single / "checkpoints" / "last.pt");
  const auto val_loss = [](const std::filesystem::path& dir) {
    const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
    REQUIRE(!epochs.empty());
    REQUIRE(epochs.back().has("val/loss"));
    return epochs.back().values.at("val/loss");
  };
  for (const char* overlap : {"true", "false"}) {
    INFO("dist.overlap = " << overlap);
    const auto two = run(std::string("ddp_skip_two_") + overlap, "--nproc-per-node 2",
                         std::string("--set train.batch_size=4 --set dist.overlap=") + overlap);
    const auto last = tp::load_checkpoint(two / "checkpoints" / "last.pt");
    CHECK(last.step == single_last.step);
    CHECK(last.step == 2 * 4); // 8 micro-batches per epoch in windows of 2
    // Rank 0's weights (the checkpoint) are the single process's ...
    CHECK(max_relative_difference(single_last, last) < 1e-5);
    // ... and so are rank 1's: the validation loss sums both ranks' shards, each evaluated with
    // that rank's own weights, so a rank that drifted would change it.
    CHECK(val_loss(two) == doctest::Approx(val_loss(single)).epsilon(1e-5));
    // The epoch's skipped samples are every rank's (4 on rank 0, 3 on rank 1), as one process's.
    for (const auto& dir : {single, two})
      for (const auto& epoch : tp::test::rows_of(tp::test::read_history(dir), "epoch"))
        CHECK(epoch.values.at("data/skipped_samples") == 7);
  }
}

TEST_CASE("a stop or a save requested on one rank only is every rank's, at the same step") {
  // RunControl agrees on every reason once per optimizer step: a callback on rank 1 alone asks
  // to stop at step 3's beginning (honoured after that step) and, in a second run, to save at
  // step 5's end (honoured now). Both ranks end together, exit 0, and rank 0 writes.
  const auto run = [](const std::string& name, int event, int requests, int at_step, const std::string& sets) {
    const auto dir = tp::test::fresh_dir(name);
    const auto config = dir / "run.toml";
    std::ofstream(config) << tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / "tests/dist/ddp.toml")
                          << "\n[[callbacks]]\ncomponent = \"org.torchhost.test.request_callback\"\nevent = " << event
                          << "\nrequests = " << requests << "\nat_step = " << at_step << "\nrank = 1\n";
    const auto result = tp::test::run_host("--nproc-per-node 2 --config '" + config.string() + "' --plugin-dir '" +
                                           std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                           "' --set train.batch_size=16 --set train.log_every_steps=1 " + sets);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return dir;
  };
  SUBCASE("stop from STEP_BEGIN on rank 1") {
    const auto dir = run("ddp_one_rank_stop", 5, 1, 2, "--set checkpoint.strategy=\"epoch\" --set checkpoint.save_top_k=0");
    CHECK(tp::load_checkpoint(dir / "checkpoints" / "last.pt").step == 3);
  }
  SUBCASE("save from STEP_END on rank 1") {
    const auto dir = run("ddp_one_rank_save", 6, 2, 5,
                         "--set checkpoint.strategy=\"no\" --set checkpoint.save_top_k=0 --set train.max_steps=8");
    CHECK(tp::load_checkpoint(dir / "checkpoints" / "last.pt").step == 5);
  }
}
