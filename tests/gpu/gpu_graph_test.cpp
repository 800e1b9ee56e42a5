// run.cuda_graphs on a GPU (docs/cuda_graphs.md): a graphed run takes the eager run's steps bit for
// bit (fp32, bf16, fp16 with overflow skips, accumulation with a short last window), and a graphed
// checkpoint resumes exactly, graphed or eager. gpu_graph_checks_test.cpp has the sync audit,
// "auto" and the captured optimizers.
#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"


#include "gpu/gpu_helpers.h"
#include "integration/checkpoint_compare.h"

#include <doctest/doctest.h>

using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;

namespace {

/// The quickstart on CUDA, deterministic, the loss of every step in the history, no evaluation.
const std::string kGraphDeterministic = kQuickstart +
                                   "--set run.deterministic=true --set train.log_every_steps=1 "
                                   "--set eval.strategy=\"no\" --set checkpoint.monitor=\"train/loss\" "
                                   "--set checkpoint.mode=\"min\" ";

std::vector<double> step_losses(const std::filesystem::path& dir) {
  std::vector<double> out;
  for (const auto& row : tp::gpu_test::step_rows(dir))
    if (row.has("train/loss")) out.push_back(row.values.at("train/loss"));
  return out;
}

tp::test::HostRun train_into(const std::string& args, const std::filesystem::path& dir) {
  return tp::test::run_host(args + "--output-dir '" + dir.string() + "'");
}

}  // namespace

TEST_CASE("a graphed run takes the eager run's steps, bit for bit") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  struct Case {
    std::string name;
    std::string args;
  };
  const std::vector<Case> cases = {
      {"fp32", "--set amp.precision=\"fp32\" --set train.max_steps=30 "},
      {"bf16", "--set amp.precision=\"bf16\" --set train.max_steps=30 "},
      // SGD with momentum from a scale that overflows for ~20 steps: eager decides the first
      // momentum step on the host, the graph skips on the device, and both back off alike.
      {"fp16", "--set amp.precision=\"fp16\" --set amp.init_scale=1099511627776.0 --set optim.name=\"sgd\" "
               "--set optim.momentum=0.9 --set optim.lr=0.05 --set train.max_steps=45 "},
      // ResNet-18's stochastic depth (da66e1a): the masks a replay draws are the eager step's,
      // and the blocks that drop run the fused BatchNorm alone, then mask, add and ReLU.
      {"resnet_drop_path", "--set amp.precision=\"bf16\" --set train.max_steps=25 "
                           "--set model.component=\"org.torchhost.resnet\" --set model.depth=18 "
                           "--set model.drop_path_rate=0.2 --set model.fused_norm=true "},
      // Adaptive gradient clipping (e2be078) after the fp16 unscale: its unit-wise norms and the
      // where() stay on the device, so the graph captures them; a factor small enough to clip.
      {"agc_fp16", "--set amp.precision=\"fp16\" --set train.agc_clip_factor=0.01 --set train.max_steps=30 "},
      // Two micro-batches per step and the epoch's short last batch and window, run eagerly.
      {"bf16_accumulation", "--set amp.precision=\"bf16\" --set train.grad_accum_steps=2 --set train.drop_last=false "
                            "--set data.train.size=1694 --set data.train.val_size=200 "},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string stem = "gpu_graph_equal_" + c.name;
    const auto eager_dir = tp::test::fresh_dir(stem + "_eager");
    const auto graph_dir = tp::test::fresh_dir(stem + "_graph");
    const auto eager = train_into(kGraphDeterministic + c.args + "--set run.cuda_graphs=\"off\" ", eager_dir);
    INFO(eager.output);
    REQUIRE(eager.exit_code == 0);
    const auto graphed = train_into(kGraphDeterministic + c.args + "--set run.cuda_graphs=\"on\" ", graph_dir);
    INFO(graphed.output);
    REQUIRE(graphed.exit_code == 0);
    const toml::table runtime = tp::gpu_test::read_toml(graph_dir / "runtime.toml");
    CHECK(tp::gpu_test::toml_bool(runtime, "cuda_graphs.graphed"));
    CHECK(tp::gpu_test::toml_string(runtime, "cuda_graphs.mode") == "on");
    const std::vector<double> a = step_losses(eager_dir), b = step_losses(graph_dir);
    REQUIRE(a.size() >= 20);
    CHECK(a == b);
    const auto x = tp::load_checkpoint(eager_dir / "checkpoints" / "last.pt");
    const auto y = tp::load_checkpoint(graph_dir / "checkpoints" / "last.pt");
    CHECK(x.step == y.step);
    CHECK(tp::test::max_relative_difference(x, y) == 0.0);
    if (c.name == "fp16") {
      const auto steps = tp::gpu_test::step_rows(graph_dir);
      REQUIRE(steps.back().has("amp/skipped_steps"));
      CHECK(steps.back().values.at("amp/skipped_steps") >= 10); // skipped inside replays too
      CHECK(steps.back().values.at("amp/skipped_steps") == tp::gpu_test::step_rows(eager_dir).back().values.at("amp/skipped_steps"));
    }
  }
}

TEST_CASE("a graphed run's checkpoint resumes exactly, graphed or eager") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const std::string args = kGraphDeterministic + "--set amp.precision=\"bf16\" --set run.cuda_graphs=\"on\" ";
  const auto straight_dir = tp::test::fresh_dir("gpu_graph_resume_straight");
  const auto straight = train_into(args, straight_dir);
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  const auto dir = tp::test::fresh_dir("gpu_graph_resume_graphed");
  const auto interrupted =
      tp::test::run_host_until_history(args + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 40);
  INFO(interrupted.output);
  REQUIRE(interrupted.output.find("exit=143") != std::string::npos);
  const auto eager_dir = tp::test::fresh_dir("gpu_graph_resume_eager");
  std::filesystem::copy(dir, eager_dir, std::filesystem::copy_options::recursive);
  const auto resumed = tp::test::run_host(args + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto resumed_eager = tp::test::run_host(args + "--set run.cuda_graphs=\"off\" --output-dir '" +
                                                eager_dir.string() + "' --resume auto");
  INFO(resumed_eager.output);
  REQUIRE(resumed_eager.exit_code == 0);
  const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
  for (const auto& resumed_dir : {dir, eager_dir}) {
    CAPTURE(resumed_dir.string());
    const auto b = tp::load_checkpoint(resumed_dir / "checkpoints" / "last.pt");
    CHECK(a.step == b.step);
    CHECK(tp::test::max_relative_difference(a, b) == 0.0);
  }
}

