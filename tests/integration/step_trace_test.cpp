// run.trace_steps (docs/profiling.md, "Tracing training steps") as a user meets it on the CPU: the
// window's steps written as a Chrome trace whose events are the training step's operators, a window
// the run never reaches warned about and nothing written, a malformed window refused with exit 2.
// On CUDA the same file holds every kernel with its device time, CUDA-graph replays included: the
// GPU benchmark's kernel breakdown reads it (bench/train_speed/gpu_bench.py).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::contains;

const std::string kTracedQuickstart = "--config configs/quickstart.toml --set progress.mode=\"off\" --set plots.enabled=false "
                           "--set eval.strategy=\"no\" ";

}  // namespace

TEST_CASE("run.trace_steps writes the window's operators as a Chrome trace") {
  const auto dir = tp::test::fresh_dir("step_trace_cpu");
  const auto run = tp::test::run_host(kTracedQuickstart + "--set train.max_steps=5 --set 'run.trace_steps=[2, 3]' --output-dir '" +
                                      dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "trace of steps 2-3 written to"));
  const auto file = dir / "trace" / "rank0.json";
  REQUIRE(std::filesystem::exists(file));
  CHECK_FALSE(std::filesystem::exists(file.string() + ".partial"));
  std::ifstream in(file);
  const nlohmann::json trace = nlohmann::json::parse(in);
  REQUIRE(trace.contains("traceEvents"));
  std::set<std::string> ops;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("cat", "") == "cpu_op") ops.insert(event.value("name", ""));
  }
  // Two steps of small_cnn: its forward, the loss's backward and the fused optimizer's update.
  INFO("operators: " << ops.size());
  CHECK(ops.count("aten::convolution") == 1);
  CHECK(ops.count("aten::max_pool2d_with_indices") == 1);
  CHECK(ops.count("aten::convolution_backward") == 1); // the autograd thread's operators are recorded too
  CHECK(ops.size() > 20);
}

TEST_CASE("run.trace_steps past the run's end warns and writes nothing; a malformed window exits 2") {
  const auto dir = tp::test::fresh_dir("step_trace_unreached");
  const auto run = tp::test::run_host(kTracedQuickstart + "--set train.max_steps=3 --set 'run.trace_steps=[10, 12]' --output-dir '" +
                                      dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "run.trace_steps = [10, 12]: the run ended at step 3 without reaching those steps"));
  CHECK_FALSE(std::filesystem::exists(dir / "trace"));

  for (const std::string window : {"[3]", "[0, 2]", "[4, 2]"}) {
    const auto bad = tp::test::run_host(kTracedQuickstart + "--set train.max_steps=3 --set 'run.trace_steps=" + window +
                                        "' --output-dir '" + (dir / "bad").string() + "'");
    INFO(window << ": " << bad.output);
    CHECK(bad.exit_code == 2);
    CHECK(contains(bad.output, "run.trace_steps must be [] (no trace) or [first, last]"));
  }
}
