// run.cuda_graphs' start-up decision (engine/training/cuda_graph_policy.h), every refusal checked without a
// GPU: "on" stops with exit 2 naming the key to change and every reason at once, "auto" trains
// eagerly, and a run that meets every condition captures.
#include "engine/training/cuda_graph_policy.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/optimizer_factory.h"

#include "support/doctest_after_torch.h"

namespace {

tp::CudaGraphFacts capturable_facts() {
  tp::CudaGraphFacts f;
  f.cuda_device = true;
  f.cuda_build = true;
  f.world_size = 1;
  f.optimizer = "sgd";
  f.device_step_optimizer = true;
  f.nan_policy = tp::NanPolicy::kStop;
  f.on_oom = tp::OomPolicy::kFail;
  f.model_id = "org.example.net";
  f.dataset_id = "org.example.data";
  return f;
}

std::string only_refusal_key(const tp::CudaGraphFacts& f) {
  const auto refusals = tp::cuda_graph_refusals(f);
  REQUIRE(refusals.size() == 1);
  return refusals.front().key;
}

}  // namespace

TEST_CASE("a single-process CUDA run with a fused optimizer and fixed shapes captures") {
  CHECK(tp::cuda_graph_refusals(capturable_facts()).empty());
  CHECK(tp::cuda_graphs_allowed(tp::CudaGraphMode::kOn, capturable_facts()));
  CHECK(tp::cuda_graphs_allowed(tp::CudaGraphMode::kAuto, capturable_facts()));
  CHECK_FALSE(tp::cuda_graphs_allowed(tp::CudaGraphMode::kOff, capturable_facts()));
}

TEST_CASE("each condition a graph cannot meet names its key") {
  tp::CudaGraphFacts f = capturable_facts();
  f.cuda_device = false;
  CHECK(only_refusal_key(f) == "run.device");
  f = capturable_facts();
  f.cuda_build = false;
  CHECK(only_refusal_key(f) == "run.device");
  f = capturable_facts();
  f.world_size = 2;
  CHECK(only_refusal_key(f) == "run.cuda_graphs");
  f = capturable_facts();
  f.device_step_optimizer = false;
  CHECK(only_refusal_key(f) == "optim.implementation");
  f.optimizer = "rmsprop";
  f.optimizer_has_fused_kernel = tp::has_fused_kernel("rmsprop");
  CHECK(only_refusal_key(f) == "optim.name");
  f = capturable_facts();
  f.nan_policy = tp::NanPolicy::kSkip;
  CHECK(only_refusal_key(f) == "train.nan_policy");
  f = capturable_facts();
  f.on_oom = tp::OomPolicy::kSplit;
  CHECK(only_refusal_key(f) == "train.on_oom");
  f = capturable_facts();
  f.activation_checkpointing = true;
  CHECK(only_refusal_key(f) == "model.activation_checkpointing");
  f = capturable_facts();
  f.model_blocker = "reads the box count on the host";
  CHECK(only_refusal_key(f) == "run.cuda_graphs");
  CHECK(tp::cuda_graph_refusals(f).front().reason.find("org.example.net declares that it cannot be captured: reads "
                                                      "the box count on the host") != std::string::npos);
  f = capturable_facts();
  f.variable_fields = "boxes: ragged";
  CHECK(only_refusal_key(f) == "run.cuda_graphs");
  CHECK(tp::cuda_graph_refusals(f).front().reason.find("org.example.data") != std::string::npos);
  f = capturable_facts();
  f.cycles_momentum = true;
  CHECK(only_refusal_key(f) == "schedule.cycle_momentum");
}

TEST_CASE("\"on\" refuses with every reason at once; \"auto\" trains eagerly") {
  tp::CudaGraphFacts f = capturable_facts();
  f.nan_policy = tp::NanPolicy::kSkip;
  f.model_blocker = "reads its output's values on the host";
  CHECK_FALSE(tp::cuda_graphs_allowed(tp::CudaGraphMode::kAuto, f));
  try {
    tp::cuda_graphs_allowed(tp::CudaGraphMode::kOn, f);
    FAIL("run.cuda_graphs = \"on\" was accepted");
  } catch (const tp::ConfigError& e) {
    const std::string message = e.what();
    CHECK(message.find("train.nan_policy") != std::string::npos);
    CHECK(message.find("(1)") != std::string::npos);
    CHECK(message.find("(2) model org.example.net declares that it cannot be captured") != std::string::npos);
    CHECK(message.find("docs/cuda_graphs.md") != std::string::npos);
  }
}
