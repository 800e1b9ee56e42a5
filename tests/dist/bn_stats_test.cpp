// dist.bn_stats (docs/distributed.md, "BatchNorm statistics"): before every evaluation and save
// the ranks' BatchNorm running statistics are made equal, rank 0's ("broadcast") or their mean
// ("reduce", timm's distribute_bn: all_reduce SUM, then / world_size, in the tensor's dtype).
// Checked on 2 Gloo ranks: the synchronisation itself against that formula bit for bit, and a
// real run, whose in-training evaluation must equal a 1-process evaluation of what it saved.
#include <ATen/ATen.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/dist/batchnorm_sync.h"

#include "bn_sync_inputs.h"
#include "free_port.h"
#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using Values = std::map<std::string, std::vector<double>>; ///< "<state> <name>" -> values

/// Runs bn_sync_driver as ranks 0 and 1 of one job; returns each rank's values after the sync
/// and checks the count of synchronised tensors.
std::vector<Values> run_driver(const std::string& mode) {
  const auto dir = tp::test::fresh_dir("bn_sync_" + mode);
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(tp::test::free_port());
  const std::string driver = std::string("'") + tp::test::build_dir() + "/bin/bn_sync_driver' " + mode + " '" + dir.string() + "'";
  const auto run = tp::test::run_shell("RANK=1 LOCAL_RANK=1 " + env + " " + driver + " & RANK=0 LOCAL_RANK=0 " + env +
                                       " " + driver + "; first=$?; wait $!; second=$?; exit $((first + second))");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::vector<Values> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(dir / ("rank" + std::to_string(rank) + ".txt"));
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(line == "synced 5"); // 4 statistics of the model, 1 of the average
    Values values;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string state, name, number;
      fields >> state >> name;
      auto& out = values[state + " " + name];
      while (fields >> number) out.push_back(std::strtod(number.c_str(), nullptr));
    }
    ranks.push_back(values);
  }
  return ranks;
}

std::vector<double> as_doubles(const at::Tensor& t) {
  const at::Tensor flat = t.to(at::kDouble).reshape({-1});
  return {flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()};
}

/// What each entry must hold on every rank after the sync.
void check_synced(const std::vector<Values>& ranks, bool reduce) {
  const auto expect = [&](const char* state, const std::vector<tp::StateTensor>& r0,
                          const std::vector<tp::StateTensor>& r1, int rank) {
    for (std::size_t i = 0; i < r0.size(); ++i) {
      const std::string& name = r0[i].name;
      CAPTURE(name);
      CAPTURE(rank);
      at::Tensor want = rank == 0 ? r0[i].tensor : r1[i].tensor; // everything else stays each rank's own
      if (tp::is_batchnorm_statistic(name))
        want = reduce ? (r0[i].tensor + r1[i].tensor).div_(2.0) : r0[i].tensor; // in the tensor's dtype
      CHECK(ranks[static_cast<std::size_t>(rank)].at(std::string(state) + " " + name) == as_doubles(want));
    }
  };
  for (int rank = 0; rank < 2; ++rank) {
    expect("model", tp::test::bn_sync_model_state(0), tp::test::bn_sync_model_state(1), rank);
    expect("average", tp::test::bn_sync_average_state(0), tp::test::bn_sync_average_state(1), rank);
  }
}

/// A 2-rank run of bn_stats.toml with dist.bn_stats = `mode`; returns its directory.
std::filesystem::path train_two_ranks(const std::string& mode) {
  const auto dir = tp::test::fresh_dir("bn_stats_" + mode);
  const auto run = tp::test::run_host("--nproc-per-node 2 --config tests/dist/bn_stats.toml --output-dir '" +
                                      dir.string() + "' --set 'dist.bn_stats=\"" + mode + "\"'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return dir;
}

/// "val/<name>" of a `host eval` JSON line ({"...":..., "val/loss":0.123456, ...}).
double json_value(const std::string& json, const std::string& name) {
  const auto at = json.find("\"" + name + "\":");
  REQUIRE(at != std::string::npos);
  return std::strtod(json.c_str() + at + name.size() + 3, nullptr);
}

}  // namespace

TEST_CASE("dist.bn_stats: after the sync both ranks hold rank 0's statistics or their mean, bit for bit") {
  check_synced(run_driver("broadcast"), /*reduce=*/false);
  check_synced(run_driver("reduce"), /*reduce=*/true);
}

TEST_CASE("a 2-rank run evaluates with the BatchNorm statistics it saves, in both dist.bn_stats modes") {
  // Each rank's last forward moves its own statistics; a sharded evaluation that did not sync
  // them first would differ from an evaluation of the checkpoint on one process.
  std::map<std::string, tp::LoadedCheckpoint> saved;
  for (const std::string mode : {"broadcast", "reduce"}) {
    CAPTURE(mode);
    const auto dir = train_two_ranks(mode);
    const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
    REQUIRE(epochs.size() == 1);
    const auto eval = tp::test::run_host("eval --config tests/dist/bn_stats.toml --output-dir '" + dir.string() +
                                         "' --checkpoint last");
    INFO(eval.output);
    REQUIRE(eval.exit_code == 0);
    const std::string json = tp::test::read_text(dir / "eval_last.json");
    // eval_last.json keeps every digit; the run's own evaluation and `host eval` sum in float32.
    CHECK(json_value(json, "val/loss") == doctest::Approx(epochs[0].values.at("val/loss")).epsilon(2e-6));
    CHECK(json_value(json, "val/accuracy") == doctest::Approx(epochs[0].values.at("val/accuracy")).epsilon(2e-6));
    saved.emplace(mode, tp::load_checkpoint(dir / "checkpoints" / "last.pt"));
  }
  // The modes train the same weights (running statistics never enter a training forward) and
  // save different statistics: rank 1's own did differ from rank 0's.
  const auto& broadcast = saved.at("broadcast").model;
  const auto& reduce = saved.at("reduce").model;
  REQUIRE(broadcast.size() == reduce.size());
  int statistics_differ = 0;
  for (std::size_t i = 0; i < broadcast.size(); ++i) {
    CAPTURE(broadcast[i].first);
    if (tp::is_batchnorm_statistic(broadcast[i].first)) statistics_differ += !at::equal(broadcast[i].second, reduce[i].second);
    else CHECK(at::equal(broadcast[i].second, reduce[i].second));
  }
  CHECK(statistics_differ == 6); // running_mean and running_var of small_cnn's three BatchNorm layers
}
