// The fused optimizers' device-only update (optim/device_step.h), on the CPU's fused kernels: the
// update a CUDA graph replays must be the eager step bit for bit, skip without a trace where the
// fp16 flag says so, keep Adam's counts on the device and still save them, and refuse to start
// state under a capture. The CUDA half (the lr as a float32 tensor, a real capture) is
// tests/gpu/gpu_graph_test.cpp's.
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include "optimizer_test_util.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/device_step.h"
#include "tp/framework/optim/optimizer_factory.h"

#include "support/doctest_after_torch.h"

namespace {

constexpr int kDeviceSteps = 5;

using DeviceRun = tp::test::OptimizerRun;
using tp::test::archive_of;

void set_grads(DeviceRun& run, const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < run.state.size(); ++i) run.state[i].tensor.mutable_grad() = grads[i].clone();
}

bool bitwise_equal(const DeviceRun& a, const DeviceRun& b) {
  for (size_t i = 0; i < a.state.size(); ++i)
    if (!at::equal(a.state[i].tensor.detach(), b.state[i].tensor.detach())) return false;
  return true;
}

int64_t adam_step_count(const torch::optim::Optimizer& optimizer, const std::string& name) {
  int64_t step = -1;
  for (const auto& [key, s] : optimizer.state())
    step = name == "adam" ? static_cast<const torch::optim::AdamParamState&>(*s).step()
                          : static_cast<const torch::optim::AdamWParamState&>(*s).step();
  return step;
}

tp::OptimSection fused_section(const std::string& name, bool amsgrad) {
  auto o = tp::test::optim_section(name, "fused");
  o.lr = 0.03;
  o.amsgrad = amsgrad;
  return o;
}

}  // namespace

TEST_CASE("a device-only update is the eager fused step, bit for bit, and a flagged one changes nothing") {
  uint64_t seed = 99;
  std::vector<at::Tensor> init;
  for (const auto& p : tp::test::model_spec()) init.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  std::vector<std::vector<at::Tensor>> grads(kDeviceSteps);
  for (auto& step : grads)
    for (const auto& p : tp::test::model_spec()) step.push_back(tp::test::lcg_tensor(seed, p.shape, 1.0));
  const at::Tensor no_skip = at::zeros({}, at::kFloat);
  const at::Tensor skip = at::ones({}, at::kFloat);

  for (const std::string name : {"sgd", "adam", "adamw"}) {
    for (const bool amsgrad : {false, true}) {
      if (name == "sgd" && amsgrad) continue;
      INFO((name + (amsgrad ? " amsgrad" : "")));
      DeviceRun eager = tp::test::start_optimizer_run(fused_section(name, amsgrad), init);
      DeviceRun device = tp::test::start_optimizer_run(fused_section(name, amsgrad), init);
      tp::DeviceStepOptimizer* d = tp::device_step(*device.built.optimizer);
      REQUIRE(d != nullptr);
      // SGD's momentum buffers start with a step the kernel must be told is the first; known
      // before the gradients exist (a capture asks before the step).
      CHECK(d->starts_state() == (name == "sgd"));
      set_grads(device, grads[0]);
      CHECK(d->starts_state() == (name == "sgd"));
      for (int t = 0; t < kDeviceSteps; ++t) {
        set_grads(eager, grads[t]);
        eager.built.optimizer->step();
        set_grads(device, grads[t]);
        d->stage_learning_rates();
        d->step_on_device(no_skip);
        CHECK(bitwise_equal(eager, device));
        // An overflowed fp16 step: the same gradients again, flagged; nothing may move.
        const std::string before = archive_of(*device.built.optimizer);
        const std::vector<at::Tensor> values = tp::test::values_of(device);
        set_grads(device, grads[t]);
        d->step_on_device(skip);
        for (size_t i = 0; i < values.size(); ++i) CHECK(at::equal(values[i], device.state[i].tensor.detach()));
        CHECK(archive_of(*device.built.optimizer) == before);
      }
      CHECK_FALSE(d->starts_state());
      if (name != "sgd") {
        // Counted on the device only; save() reads them back, skipped steps not counted.
        (void)archive_of(*device.built.optimizer);
        CHECK(adam_step_count(*device.built.optimizer, name) == kDeviceSteps);
        CHECK(adam_step_count(*eager.built.optimizer, name) == kDeviceSteps);
      }
    }
  }
}

TEST_CASE("a checkpoint after device-only updates resumes on the per-parameter loop") {
  uint64_t seed = 3;
  std::vector<at::Tensor> init;
  for (const auto& p : tp::test::model_spec()) init.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  std::vector<std::vector<at::Tensor>> grads(2 * kDeviceSteps);
  for (auto& step : grads)
    for (const auto& p : tp::test::model_spec()) step.push_back(tp::test::lcg_tensor(seed, p.shape, 1.0));
  for (const std::string name : {"adam", "adamw"}) {
    INFO(name);
    DeviceRun reference = tp::test::start_optimizer_run(fused_section(name, false), init);
    for (const auto& g : grads) {
      set_grads(reference, g);
      reference.built.optimizer->step();
    }
    DeviceRun device = tp::test::start_optimizer_run(fused_section(name, false), init);
    tp::DeviceStepOptimizer* d = tp::device_step(*device.built.optimizer);
    for (int t = 0; t < kDeviceSteps; ++t) {
      set_grads(device, grads[t]);
      d->stage_learning_rates();
      d->step_on_device(at::Tensor());
    }
    const std::string archive = archive_of(*device.built.optimizer);
    auto loop_options = tp::test::optim_section(name, "for_loop");
    loop_options.lr = 0.03;
    DeviceRun loop = tp::test::start_optimizer_run(loop_options, tp::test::values_of(device));
    tp::test::load_archive(*loop.built.optimizer, archive);
    for (int t = kDeviceSteps; t < 2 * kDeviceSteps; ++t) {
      set_grads(loop, grads[t]);
      loop.built.optimizer->step();
    }
    for (size_t i = 0; i < init.size(); ++i)
      CHECK(tp::test::relative_difference(loop.state[i].tensor.detach(), reference.state[i].tensor.detach()) <= 1e-6);
  }
}

TEST_CASE("under a capture, an update that would start optimizer state is refused") {
  uint64_t seed = 11;
  std::vector<at::Tensor> init;
  for (const auto& p : tp::test::model_spec()) init.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  std::vector<at::Tensor> grads;
  for (const auto& p : tp::test::model_spec()) grads.push_back(tp::test::lcg_tensor(seed, p.shape, 1.0));
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    INFO(name);
    DeviceRun run = tp::test::start_optimizer_run(fused_section(name, false), init);
    tp::DeviceStepOptimizer* d = tp::device_step(*run.built.optimizer);
    set_grads(run, grads);
    d->forbid_new_state(true);
    d->stage_learning_rates();
    CHECK_THROWS_WITH_AS(d->step_on_device(at::Tensor()), doctest::Contains("warm-up steps before capture"), tp::Error);
    d->forbid_new_state(false);
    d->step_on_device(at::Tensor()); // once the state exists (the warm-up), capture is fine
    d->forbid_new_state(true);
    set_grads(run, grads);
    CHECK_NOTHROW(d->step_on_device(at::Tensor()));
  }
}

TEST_CASE("only the fused optimizers update on the device") {
  uint64_t seed = 1;
  std::vector<at::Tensor> init;
  for (const auto& p : tp::test::model_spec()) init.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    CHECK(tp::device_step(*tp::test::start_optimizer_run(tp::test::optim_section(name, "fused"), init).built.optimizer) != nullptr);
    CHECK(tp::device_step(*tp::test::start_optimizer_run(tp::test::optim_section(name, "for_loop"), init).built.optimizer) == nullptr);
  }
  CHECK(tp::device_step(*tp::test::start_optimizer_run(tp::test::optim_section("rmsprop"), init).built.optimizer) == nullptr);
}
