// Profiling plugin models through ModelProxy: FLOPs of mlp, small_cnn and deep_cnn equal
// FlopCounterMode's on the same architectures rebuilt in Python (flop_oracle.py); profiling
// leaves the model's parameters, buffers, mode and device as they were; profile.json has every
// field and per-batch = per-sample x batch (checked in Python by check_profile_json.py).
#include "profile_test_util.h"

#include <c10/core/InferenceMode.h>

#include <fstream>

#include "tp/framework/plugin/model_inputs.h"
#include "tp/framework/profile/model_profile.h"
#include "tp/framework/profile/profile_report.h"

namespace {

using namespace tp;

constexpr const char* kVision = "vision_models";

NamedTensors examples(const std::string& id, int64_t batch) {
  return example_batch(test::examples_of(kVision, id), batch);
}

/// Every parameter and buffer, cloned (the values to compare against later).
std::vector<std::pair<std::string, at::Tensor>> snapshot(const ModelProxy& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& s : model.state()) out.emplace_back(s.name, s.tensor.detach().clone());
  return out;
}

void check_same_state(const ModelProxy& model, const std::vector<std::pair<std::string, at::Tensor>>& before) {
  const auto now = model.state();
  REQUIRE(now.size() == before.size());
  for (std::size_t i = 0; i < now.size(); ++i) {
    INFO(now[i].name);
    CHECK(now[i].name == before[i].first);
    CHECK(now[i].tensor.device() == before[i].second.device());
    CHECK((now[i].tensor.scalar_type() == before[i].second.scalar_type()));
    CHECK(at::equal(now[i].tensor, before[i].second));
  }
}

TEST_CASE("FLOPs of mlp, small_cnn and deep_cnn equal FlopCounterMode's on the same architecture") {
  for (const char* name : {"mlp", "small_cnn", "deep_cnn"}) {
    INFO(name);
    const std::string oracle = test::run_python("flop_oracle.py", name);
    auto model = test::make_model(kVision, std::string("org.torchhost.") + name);
    model->set_training(false);
    const auto [flops, ops] = count_forward_flops(*model, examples(std::string("org.torchhost.") + name, 4));
    CHECK(flops == test::json_int(oracle, "total"));
    CHECK(flops > 0);
  }
}

TEST_CASE("counting FLOPs only reads: same outputs, same state") {
  auto model = test::make_model(kVision, "org.torchhost.small_cnn");
  model->set_training(false);
  const NamedTensors batch = examples("org.torchhost.small_cnn", 3);
  const auto before = snapshot(*model);
  at::Tensor plain;
  {
    c10::InferenceMode inference;
    plain = model->forward(batch).front().second;
  }
  (void)count_forward_flops(*model, batch);
  at::Tensor counted;
  {
    c10::InferenceMode inference;
    counted = model->forward(batch).front().second;
  }
  CHECK(at::equal(plain, counted));
  check_same_state(*model, before);
}

TEST_CASE("profile_model leaves parameters, buffers, training mode and device as they were") {
  auto model = test::make_model(kVision, "org.torchhost.small_cnn");
  model->set_training(true);
  const auto before = snapshot(*model);
  ProfileOptions options;
  options.precisions = {Precision::Fp32, Precision::Bf16};
  options.iterations = 3;
  options.warmup = 1;
  const ModelProfile profile = profile_model(*model, examples("org.torchhost.small_cnn", 4), options);
  CHECK(profile.latency.size() == 2);
  check_same_state(*model, before);  // eval mode during profiling: batch-norm statistics untouched

  // Still in training mode: a training-mode forward moves the batch-norm running statistics
  // (an eval-mode one would not).
  at::Tensor mean_before;
  for (const auto& s : model->state())
    if (s.name == "trunk.bn1.running_mean") mean_before = s.tensor.clone();
  REQUIRE(mean_before.defined());
  {
    c10::InferenceMode inference;
    model->forward(examples("org.torchhost.small_cnn", 4));
  }
  for (const auto& s : model->state())
    if (s.name == "trunk.bn1.running_mean") CHECK_FALSE(at::equal(s.tensor, mean_before));
}

TEST_CASE("profile: sizes, FLOPs and latency fields are consistent; profile.json checked in Python") {
  auto model = test::make_model(kVision, "org.torchhost.small_cnn");
  ProfileOptions options;
  options.precisions = {Precision::Fp32, Precision::Bf16};
  options.iterations = 5;
  options.warmup = 1;
  ModelProfile p = profile_model(*model, examples("org.torchhost.small_cnn", 8), options, "[run]\nseed = 1\n");
  p.input_source = "examples";
  CHECK(p.batch_size == 8);
  CHECK(p.size.parameters == 56675);  // small_cnn's documented count at the defaults
  CHECK(p.size.trainable == p.size.parameters);
  int64_t bytes = 0;
  for (const auto& s : model->state()) bytes += s.tensor.numel() * static_cast<int64_t>(s.tensor.element_size());
  CHECK(p.size.bytes == bytes);
  CHECK(p.checkpoint_bytes > p.size.bytes);
  CHECK(p.flops_per_batch == 8 * (test::json_int(test::run_python("flop_oracle.py", "small_cnn"), "total") / 4));
  for (const LatencyEntry& e : p.latency) {
    INFO(e.precision << ": " << e.error);
    CHECK(e.error.empty());
    CHECK(e.batch.iterations == 5);
    CHECK(e.batch.min_ms <= e.batch.p50_ms);
    CHECK(e.batch.p50_ms <= e.batch.p90_ms);
    CHECK(e.batch.p90_ms <= e.batch.p99_ms);
    CHECK(e.batch.p99_ms <= e.batch.max_ms);
    CHECK(e.peak_memory_mb > 0);
  }
  const auto file = std::filesystem::temp_directory_path() / "torchhost-profile-test.json";
  std::ofstream(file) << profile_json(p);
  const std::string out = test::run_python("check_profile_json.py", "'" + file.string() + "' 56675 8");
  CHECK(out.find("ok") != std::string::npos);
  std::filesystem::remove(file);
  const std::string table = profile_table(p);
  for (const char* part : {"org.torchhost.small_cnn", "56675", "FLOPs", "aten::convolution", "fp32", "bf16", "p99"})
    CHECK_MESSAGE(table.find(part) != std::string::npos, part << " in\n" << table);
}

}  // namespace
