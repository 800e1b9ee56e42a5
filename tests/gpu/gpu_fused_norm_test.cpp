// The fused BatchNorm + [residual add +] ReLU through the SDK's tp::cpp::batch_norm_relu
// (plugin_api/include/tp/cpp/fused_norm.h) against the module path it replaces: with a residual the
// ops torchhost::bn_act_forward and bn_act_backward (framework/src/ops), without one
// torchhost::bn_activation_forward and bn_activation_backward with ReLU. Forward, gradients, running
// statistics, determinism, the cases that must stay unfused, CUDA-graph capture, and ResNet-18
// trained by the host with model.fused_norm on and off. BatchNorm alone is
// gpu_fused_batch_norm_test.cpp's, the other activations gpu_fused_activation_test.cpp's; the step
// they run is fused_norm_support.h's.
//
// Tolerances (relative L2: |fused - reference| / |reference|), measured on an H200 at about a
// tenth of each bound. The fused path rounds once to x's dtype; the module path rounds after
// BatchNorm and again after the residual add, so where bn(x) + residual is within a rounding of zero
// the two ReLUs can disagree (about 1 element in 1,000 in bf16 with a residual) and there one
// path's gradient passes and the other's does not. So the reference for the gradients applies the
// fused output's ReLU mask (reference y = (bn(x) + residual) * (fused y > 0)), and the mask flips
// are bounded separately. Within that: float32 1e-5 (fp32 arithmetic on both sides), float16 1e-4
// on gradients and 2e-3 on y (11-bit mantissa), bfloat16 2e-2 (8-bit mantissa; the reference's own
// bf16 BatchNorm backward differs from an fp32 one by a few 1e-3). Running statistics within 1e-5
// (both accumulate in fp32 or better). BatchNorm alone has no mask: the same bounds, against the
// module path itself.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/modules/batchnorm.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tp/cpp/fused_norm.h"

#include "gpu/fused_norm_support.h"
#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using namespace tp::gpu_test::fused_norm;  // NOLINT(google-build-using-namespace): the shared step and bounds

TEST_CASE("fused BatchNorm + ReLU: forward, gradients and running statistics match the module path per dtype") {
  require_ops();
  const std::vector<std::vector<int64_t>> shapes = {{2, 64, 5, 7}, {8, 256, 14, 14}, {32, 100, 9, 9}, {64, 64, 56, 56},
                                                    {4, 3, 17, 13}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const Bounds bound = bounds_for(dtype);
    for (const auto& shape : shapes) {
      for (const bool with_residual : {false, true}) {
        const at::IntArrayRef dims(shape);
        CAPTURE(dtype);
        CAPTURE(dims);
        CAPTURE(with_residual);
        at::manual_seed(11);
        const torch::nn::BatchNorm2d bn = make_norm(shape[1]);
        // A mean away from 0 exercises the statistics' shift; the residual and dy are centred.
        const at::Tensor x = channels_last(shape, dtype, 2.0, 3.0);
        const at::Tensor residual = with_residual ? channels_last(shape, dtype, 1.0, 0.0) : at::Tensor();
        const at::Tensor dy = channels_last(shape, dtype, 1.0, 0.0);

        const Outcome fused = run(bn, x, residual, dy, Path::kFused);
        CHECK((with_residual ? is_relu_norm_node(fused.grad_fn) : is_activation_norm_node(fused.grad_fn)));
        const at::Tensor mask = fused.y > 0;
        const Outcome plain = run(bn, x, residual, dy, Path::kModule);
        const double flips = (plain.y > 0).ne(mask).to(at::kDouble).mean().item<double>();
        const Outcome reference = run(bn, x, residual, dy, Path::kModule, mask);
        MESSAGE("y " << relative_l2(fused.y, reference.y) << ", dx " << relative_l2(fused.dx, reference.dx)
                     << ", dweight " << relative_l2(fused.d_weight, reference.d_weight) << ", dbias "
                     << relative_l2(fused.d_bias, reference.d_bias) << ", mask flips " << flips);
        CHECK(flips <= bound.mask_flips);
        CHECK(relative_l2(fused.y, reference.y) <= bound.y);
        CHECK(relative_l2(fused.dx, reference.dx) <= bound.grad);
        CHECK(relative_l2(fused.d_weight, reference.d_weight) <= bound.grad);
        CHECK(relative_l2(fused.d_bias, reference.d_bias) <= bound.grad);
        if (with_residual) {
          // The residual's gradient is dy where the fused output passed the ReLU, exactly.
          CHECK(at::equal(fused.d_residual, dy * mask.to(dtype)));
          CHECK(relative_l2(fused.d_residual, reference.d_residual) <= bound.grad);
        }
        CHECK(max_abs_diff(fused.running_mean, reference.running_mean) <= 1e-5);
        CHECK(max_abs_diff(fused.running_var, reference.running_var) <= 1e-5 * std::max(1.0, reference.running_var.abs().max().item<double>()));
        CHECK(at::equal(fused.batches, reference.batches));
        CHECK(fused.y.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK((fused.dx.scalar_type() == dtype));
      }
    }
  }
}

TEST_CASE("fused BatchNorm + ReLU: two runs give the same bits; a storage offset and an NCHW dy are read right") {
  require_ops();
  at::manual_seed(3);
  const torch::nn::BatchNorm2d bn = make_norm(256);
  const at::Tensor x = channels_last({32, 256, 28, 28}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor residual = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  const at::Tensor dy = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  CHECK(same_bits(run(bn, x, residual, dy, Path::kFused), run(bn, x, residual, dy, Path::kFused)));

  // x one element into its storage (the scalar, unaligned path) gives what an aligned copy gives;
  // a dy in NCHW memory is made channels-last by the SDK's backward.
  const at::Tensor storage = at::randn({1 + 2 * 5 * 7 * 64}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const at::Tensor shifted = storage.narrow(0, 1, int64_t{2} * 5 * 7 * 64).view({2, 5, 7, 64}).permute({0, 3, 1, 2});
  REQUIRE(shifted.is_contiguous(at::MemoryFormat::ChannelsLast));
  REQUIRE(reinterpret_cast<std::uintptr_t>(shifted.const_data_ptr()) % 16 != 0);
  const torch::nn::BatchNorm2d small = make_norm(64);
  const at::Tensor small_dy = at::randn({2, 64, 5, 7}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const Outcome offset = run(small, shifted, {}, small_dy, Path::kFused);
  const Outcome aligned = run(small, shifted.clone(), {}, small_dy.contiguous(at::MemoryFormat::ChannelsLast), Path::kFused);
  CHECK(same_bits(offset, aligned));
}

TEST_CASE("batch_norm_relu keeps the module path, bit for bit, in eval, on NCHW input and with allow_fused = false") {
  require_ops();
  at::manual_seed(5);
  const torch::nn::BatchNorm2d bn = make_norm(64);
  const at::Tensor x = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.5);
  const at::Tensor residual = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.0);
  const at::Tensor dy = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.0);
  const auto module_path = [](torch::nn::BatchNorm2d& b, const at::Tensor& in, const at::Tensor& r) {
    at::Tensor out = b->forward(in);
    out += r;
    return out.relu_();
  };
  {  // eval: running statistics, the module's own kernels
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    a->eval();
    b->eval();
    const at::Tensor fused = tp::cpp::batch_norm_relu(a, x, residual);
    CHECK(at::equal(fused, module_path(b, x, residual)));
  }
  {  // NCHW input in training
    const at::Tensor nchw = x.contiguous();
    const at::Tensor nchw_residual = residual.contiguous();
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    const at::Tensor fused = tp::cpp::batch_norm_relu(a, nchw, nchw_residual);
    CHECK(at::equal(fused, module_path(b, nchw, nchw_residual)));
    CHECK(at::equal(a->running_mean, b->running_mean));
    CHECK(at::equal(a->num_batches_tracked, b->num_batches_tracked));
  }
  {  // allow_fused = false
    torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
    const at::Tensor fused = tp::cpp::batch_norm_relu(a, x, residual, /*allow_fused=*/false);
    CHECK(at::equal(fused, module_path(b, x, residual)));
    CHECK(at::equal(a->running_var, b->running_var));
  }
  {  // momentum = None (cumulative average)
    torch::nn::BatchNorm2d a(torch::nn::BatchNorm2dOptions(64).momentum(std::nullopt));
    a->to(at::kCUDA);
    torch::nn::BatchNorm2d b = copy_of(a);
    const Outcome none = run(a, x, residual, dy, Path::kFused);
    CHECK(!is_relu_norm_node(none.grad_fn));
    CHECK(!is_activation_norm_node(none.grad_fn));
    CHECK(at::equal(tp::cpp::batch_norm_relu(a, x, residual), module_path(b, x, residual)));
  }
}

TEST_CASE("the fused path refuses a double backward with a message, and an optional holding no tensor is no residual") {
  require_ops();
  at::manual_seed(9);
  torch::nn::BatchNorm2d bn = make_norm(32);
  const at::Tensor x = channels_last({4, 32, 6, 6}, at::kFloat, 1.0, 0.5).requires_grad_();
  const at::Tensor residual = channels_last({4, 32, 6, 6}, at::kFloat, 1.0, 0.0);
  // Both nodes batch_norm_relu builds: without a residual the activation pair's, with one bn_act's.
  for (const bool with_residual : {false, true}) {
    CAPTURE(with_residual);
    const at::Tensor y = tp::cpp::batch_norm_relu(bn, x, with_residual ? residual : at::Tensor());
    const std::string node = y.grad_fn()->name();
    REQUIRE((with_residual ? is_relu_norm_node(node) : is_activation_norm_node(node)));
    // create_graph = true: the backward op has no derivative, so a second one would be silently zero.
    try {
      torch::autograd::grad({y.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
      FAIL("a double backward through the fused path was not refused");
    } catch (const c10::Error& e) {
      CHECK(std::string(e.what()).find("not twice differentiable") != std::string::npos);
    }
    // The same graph's first-order backward still runs.
    const auto grads = torch::autograd::grad({y.sum()}, {x});
    CHECK(grads[0].defined());
  }

  // An optional holding an undefined tensor, handed to the autograd function directly, is read as
  // no residual: its gradient slot stays empty, and the values equal the residual-free call's (the
  // activation pair's forward with ReLU: the same kernels, so the same bits).
  torch::nn::BatchNorm2d a = copy_of(bn), b = copy_of(bn);
  const at::Tensor plain = x.detach().clone().requires_grad_();
  const at::Tensor via_empty = tp::cpp::detail::BatchNormReluFunction::apply(
      plain, std::optional<at::Tensor>(at::Tensor()), a->weight, a->bias, a->running_mean, a->running_var,
      *a->options.momentum(), a->options.eps());
  via_empty.sum().backward();
  const at::Tensor reference = tp::cpp::batch_norm_relu(b, x.detach());
  CHECK(at::equal(via_empty.detach(), reference));
  CHECK(plain.grad().defined());
}

TEST_CASE("fused BatchNorm + ReLU is captured in a CUDA graph: one replay gives the eager step") {
  require_ops();
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  at::manual_seed(9);
  const torch::nn::BatchNorm2d bn = make_norm(128);
  const at::Tensor x = channels_last({16, 128, 14, 14}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor residual = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  const at::Tensor dy = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  check_graph_replay_is_eager(
      bn, {x, residual}, dy,
      [](torch::nn::BatchNorm2d& b, const std::vector<at::Tensor>& in) { return tp::cpp::batch_norm_relu(b, in[0], in[1]); },
      is_relu_norm_node);
#endif
}


namespace {

/// ResNet-18 on shapes 64x64 through the host: bf16, channels-last, 30 steps, every step's loss.
std::vector<double> resnet_losses(const std::string& extra, const std::string& name) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(
      "--config configs/resnet18.toml --set run.device=\"cuda\" --set run.channels_last=true "
      "--set amp.precision=\"bf16\" --set progress.mode=\"off\" --set plots.enabled=false --set train.epochs=1 "
      "--set data.train.size=960 --set data.train.val_size=128 --set train.log_every_steps=1 "
      "--set eval.strategy=\"no\" --set checkpoint.monitor=\"train/loss\" --set checkpoint.mode=\"min\" " +
      extra + " --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::vector<double> losses;
  for (const auto& row : tp::gpu_test::step_rows(dir))
    if (row.has("train/loss")) losses.push_back(row.values.at("train/loss"));
  return losses;
}

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  double sum = 0.0;
  for (size_t i = from; i < to; ++i) sum += v[i];
  return sum / static_cast<double>(to - from);
}

}  // namespace

TEST_CASE("ResNet-18 on CUDA, bf16, channels-last: model.fused_norm = true trains as false does (eager, graphed, checkpointed)") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // Not bit for bit: cuDNN's and max-pool's backward kernels are not deterministic run to run, and
  // the fused path rounds differently. Bounds: the first step (one forward from the same
  // initialisation) within 2%, the mean loss of the 30 steps within 10%, and both runs learn.
  const auto unfused = resnet_losses("--set model.fused_norm=false", "gpu_fused_norm_off");
  const auto fused = resnet_losses("--set model.fused_norm=true", "gpu_fused_norm_on");
  const auto graphed = resnet_losses("--set model.fused_norm=true --set run.cuda_graphs=\"on\"", "gpu_fused_norm_graphs");
  // Activation checkpointing recomputes each block (fused ops included) in backward, its BatchNorm
  // statistics restored after the recompute.
  const auto checkpointed =
      resnet_losses("--set model.fused_norm=true --set model.activation_checkpointing=true", "gpu_fused_norm_checkpointed");
  REQUIRE(unfused.size() == 30);
  REQUIRE(fused.size() == unfused.size());
  REQUIRE(graphed.size() == unfused.size());
  REQUIRE(checkpointed.size() == unfused.size());
  const size_t n = unfused.size();
  MESSAGE("first loss: unfused " << unfused[0] << ", fused " << fused[0] << ", graphed " << graphed[0]
                                 << "; mean: unfused " << mean_of(unfused, 0, n) << ", fused " << mean_of(fused, 0, n)
                                 << ", graphed " << mean_of(graphed, 0, n) << ", checkpointed "
                                 << mean_of(checkpointed, 0, n));
  for (const auto* run : {&fused, &graphed, &checkpointed}) {
    CHECK(std::abs((*run)[0] - unfused[0]) <= 0.02 * unfused[0]);
    CHECK(std::abs(mean_of(*run, 0, n) - mean_of(unfused, 0, n)) <= 0.10 * mean_of(unfused, 0, n));
    CHECK(mean_of(*run, n - 5, n) < (*run)[0]);
    for (const double loss : *run) CHECK(std::isfinite(loss));
  }
  CHECK(mean_of(unfused, n - 5, n) < unfused[0]);
}
