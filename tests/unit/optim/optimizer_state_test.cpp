// save() -> load() between the fused and the loop implementations: a run that switches
// implementation at a checkpoint continues like one that never switched, because both keep the
// same per-parameter state objects (momentum buffers, moments, integer step counts).
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include "optimizer_test_util.h"
#include "tp/framework/optim/optimizer_factory.h"

namespace {

constexpr int kOptimizerStateSteps = 6;
constexpr int kSwitchAt = 3;

using Run = tp::test::OptimizerRun;

void steps(Run& run, const std::vector<std::vector<at::Tensor>>& grads, int from, int to) {
  for (int t = from; t < to; ++t) {
    for (size_t i = 0; i < run.state.size(); ++i) run.state[i].tensor.mutable_grad() = grads[t][i].clone();
    run.built.optimizer->step();
  }
}

}  // namespace

TEST_CASE("a checkpoint of one implementation resumes on the other") {
  uint64_t seed = 777;
  std::vector<at::Tensor> init;
  for (const auto& p : tp::test::model_spec()) init.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  std::vector<std::vector<at::Tensor>> grads(kOptimizerStateSteps);
  for (auto& step : grads)
    for (const auto& p : tp::test::model_spec()) step.push_back(tp::test::lcg_tensor(seed, p.shape, 1.0));

  for (const std::string name : {"sgd", "adam", "adamw"}) {
    for (const bool amsgrad : {false, true}) {
      if (name == "sgd" && amsgrad) continue;
      for (const bool fused_first : {true, false}) {
        INFO(name, amsgrad ? " amsgrad" : "", fused_first ? ": fused -> for_loop" : ": for_loop -> fused");
        auto first = tp::test::optim_section(name, fused_first ? "fused" : "for_loop");
        auto second = tp::test::optim_section(name, fused_first ? "for_loop" : "fused");
        first.lr = second.lr = 0.02;
        first.amsgrad = second.amsgrad = amsgrad;
        // Uninterrupted reference on the second implementation.
        Run reference = tp::test::start_optimizer_run(second, init);
        steps(reference, grads, 0, kOptimizerStateSteps);

        Run before = tp::test::start_optimizer_run(first, init);
        CHECK(before.built.fused == fused_first);
        steps(before, grads, 0, kSwitchAt);
        const std::string archive = tp::test::archive_of(*before.built.optimizer);
        Run after = tp::test::start_optimizer_run(second, tp::test::values_of(before));
        CHECK(after.built.fused != fused_first);
        tp::test::load_archive(*after.built.optimizer, archive);
        // The archive restores every state object (keyed by parameter order in the archive).
        CHECK(after.built.optimizer->state().size() == before.built.optimizer->state().size());
        steps(after, grads, kSwitchAt, kOptimizerStateSteps);
        for (size_t i = 0; i < init.size(); ++i) {
          INFO(after.state[i].name);
          CHECK(tp::test::relative_difference(after.state[i].tensor.detach(), reference.state[i].tensor.detach()) <=
                1e-6);
        }
        // Adam's step counts carried over: a restarted count would change the bias correction.
        if (name != "sgd") {
          for (const auto& [key, s] : after.built.optimizer->state()) {
            const int64_t step = name == "adam" ? static_cast<const torch::optim::AdamParamState&>(*s).step()
                                                : static_cast<const torch::optim::AdamWParamState&>(*s).step();
            CHECK(step == kOptimizerStateSteps);
          }
        }
      }
    }
  }
}

TEST_CASE("the fused path fixes the layout of state restored for a channels-last parameter") {
  // A 4-D parameter in channels-last memory: the loop's state from a checkpoint is contiguous,
  // which the fused CPU kernel (one linear index over param, grad and state) must not see.
  uint64_t seed = 5;
  const at::Tensor value = tp::test::lcg_tensor(seed, {2, 3, 2, 2}, 0.5);
  std::vector<at::Tensor> grads;
  for (int t = 0; t < 4; ++t) grads.push_back(tp::test::lcg_tensor(seed, {2, 3, 2, 2}, 1.0));
  auto make = [&](const std::string& impl) {
    std::vector<tp::StateTensor> state{
        {"conv.weight", value.contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(), false}};
    auto o = tp::test::optim_section("adamw", impl);
    o.lr = 0.05;
    tp::BuiltOptimizer built = tp::make_optimizer(o, state);
    return std::make_pair(state, std::move(built));
  };
  auto [loop_state, loop] = make("for_loop");
  auto [fused_state, fused] = make("fused");
  auto run = [&](std::vector<tp::StateTensor>& state, torch::optim::Optimizer& opt, int from, int to) {
    for (int t = from; t < to; ++t) {
      state[0].tensor.mutable_grad() = grads[t].contiguous(at::MemoryFormat::ChannelsLast);
      opt.step();
    }
  };
  run(loop_state, *loop.optimizer, 0, 2);
  const std::string archive = tp::test::archive_of(*loop.optimizer);
  {
    at::NoGradGuard no_grad;
    fused_state[0].tensor.copy_(loop_state[0].tensor);
  }
  tp::test::load_archive(*fused.optimizer, archive);
  run(loop_state, *loop.optimizer, 2, 4);
  run(fused_state, *fused.optimizer, 2, 4);
  CHECK(fused_state[0].tensor.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(tp::test::relative_difference(fused_state[0].tensor.detach(), loop_state[0].tensor.detach()) <= 1e-6);
}
