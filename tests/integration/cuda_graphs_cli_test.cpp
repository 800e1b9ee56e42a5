// run.cuda_graphs as a user without a GPU meets it (docs/cuda_graphs.md): "on" where graphs cannot
// apply stops at start-up with exit 2, every reason and its key (the model plugin's own reason
// through ABI 1.8 among them), before anything is written but the run's config; "auto" trains
// eagerly and says why in runtime.toml; "off" records that too. The GPU side is
// tests/gpu/gpu_graph_test.cpp.
#include <toml++/toml.h>

#include <filesystem>
#include <string>

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::contains;

const std::string kQuick = "--config configs/quickstart.toml --set progress.mode=\"off\" --set plots.enabled=false "
                           "--set train.max_steps=3 --set eval.strategy=\"no\" ";

/// runtime.toml's [cuda_graphs] table as the host wrote it, parsed.
toml::table cuda_graphs_table_of(const std::filesystem::path& run_dir) {
  const toml::table runtime = toml::parse_file((run_dir / "runtime.toml").string());
  const toml::table* table = runtime["cuda_graphs"].as_table();
  REQUIRE_MESSAGE(table != nullptr, "runtime.toml has no [cuda_graphs] table");
  return *table;
}

}  // namespace

TEST_CASE("run.cuda_graphs = \"on\" on the CPU exits 2 with every reason and its key") {
  const auto dir = tp::test::fresh_dir("cuda_graphs_on_cpu");
  const auto run = tp::test::run_host(
      kQuick + "--plugin-dir '" + tp::test::fixture_plugin_dir() +
      "' --set model.component=\"org.torchhost.test.uncapturable_model\" --set train.nan_policy=\"skip\" "
      "--set run.cuda_graphs=\"on\" --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "run.cuda_graphs = \"on\" cannot capture this run's training step"));
  CHECK(contains(run.output, "[run.device]"));
  CHECK(contains(run.output, "[train.nan_policy]"));
  CHECK(contains(run.output, "model org.torchhost.test.uncapturable_model declares that it cannot be captured: reads "
                             "its output's values on the host"));
  CHECK(contains(run.output, "docs/cuda_graphs.md"));
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "last.pt"));
  CHECK(tp::test::read_text(dir / "history.jsonl").empty()); // refused before the first step
}

TEST_CASE("run.cuda_graphs = \"auto\" on the CPU trains eagerly and records why") {
  const auto dir = tp::test::fresh_dir("cuda_graphs_auto_cpu");
  const auto run = tp::test::run_host(kQuick + "--set run.cuda_graphs=\"auto\" --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string runtime = tp::test::read_text(dir / "runtime.toml");
  INFO(runtime);
  const toml::table graphs = cuda_graphs_table_of(dir);
  CHECK(graphs["mode"].value_or(std::string()) == "auto");
  CHECK(graphs["graphed"].value_or(true) == false);
  // This build's LibTorch is the CPU one; a CUDA build would say the run trains on the CPU.
  const std::string state = graphs["state"].value_or(std::string());
  CHECK(state.rfind("eager: ", 0) == 0);
  CHECK(contains(state, "[run.device]"));
  CHECK(contains(runtime, "device_prefetch = false")); // CPU: nothing to copy
  CHECK(contains(run.output, "run.cuda_graphs = \"auto\": training eagerly"));
}

TEST_CASE("run.cuda_graphs = \"off\" is recorded, and a misspelt mode exits 2") {
  const auto dir = tp::test::fresh_dir("cuda_graphs_off_cpu");
  // run.sync_debug is CUDA's check: nothing synchronises a CPU step, so "error" changes nothing here.
  const auto run = tp::test::run_host(kQuick + "--set run.sync_debug=\"error\" --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const toml::table graphs = cuda_graphs_table_of(dir);
  CHECK(graphs["mode"].value_or(std::string()) == "off");
  CHECK(graphs["graphed"].value_or(true) == false);
  const auto typo = tp::test::run_host(kQuick + "--set run.cuda_graphs=\"yes\" --output-dir '" + dir.string() + "'");
  INFO(typo.output);
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.output, "run.cuda_graphs"));
}
