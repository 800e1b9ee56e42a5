// BatchNorm + an activation through the fused ops whose backward recomputes the activation's input
// from x (framework/src/ops, torchhost::bn_activation_forward and bn_activation_backward), by the
// SDK's tp::cpp::batch_norm_act and batch_norm_relu without a residual: forward, gradients and
// running statistics per activation and dtype against the module path; the recomputed ReLU mask
// giving the stored-mask pair's (bn_act_forward / bn_act_backward) results bit for bit;
// determinism; CUDA-graph capture; the cases that stay unfused; a double backward refused. The step
// is fused_norm_support.h's.
//
// The reference is the module path in float32 on the same values (x and dy converted exactly), its
// y and dx rounded once to x's dtype as the fused path rounds its own; not the module path in x's
// dtype, as gpu_fused_norm_test.cpp's. That one rounds BatchNorm's output before the activation and
// the activation's gradient before BatchNorm's backward, which costs ReLU nothing (its gradient is
// dy or 0) but moves SiLU's and Hardswish's gradients past that file's bounds, though the fused
// path is the more exact: dx by about 4e-4 (SiLU) and 5e-3 (Hardswish, whose derivative jumps by
// dy / 2 at -3 and 3, which a rounded input can cross) in float16, d_weight by 2e-2 (Hardswish) in
// bfloat16 (a CPU emulation of both paths, not measured on a GPU). ReLU's mask and Hardswish's piece
// are the fused path's (its output's sign; its activation input, recomputed below), as
// gpu_fused_norm_test.cpp takes the mask; how often they differ from the float32 module path's own
// is bounded apart, by gpu_fused_norm_test.cpp's mask bounds (1e-5 of the elements in float32,
// 1e-3 in float16, 5e-3 in bfloat16: the two activation inputs agree to about 1e-6 relative, so
// only values that close to a kink differ, but a 16-bit x holds each value hundreds of times in a
// channel, and one value on a kink flips all its copies). What remains is float32 arithmetic
// (1e-7 relative in the emulation, about 1e-6 measured by gpu_fused_norm_test.cpp) ahead of one
// rounding: a value rounds differently on the two sides in about one element in ulp / 1e-6, and by
// one ulp. Bounds (relative L2): y and dx 1e-5 (float32), 1e-4 (float16), 1e-3 (bfloat16); d_weight
// and d_bias, float32 on both sides from the same values, 1e-5 in every dtype (the float32 bound of
// gpu_fused_norm_test.cpp); running statistics within 1e-5 as there. The emulation's worst over
// these shapes: y and dx 1.2e-7, 1.4e-5 and 4e-5; d_weight 8e-7 (3 channels).
#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/modules/batchnorm.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tp/cpp/fused_norm.h"

#include "gpu/fused_norm_support.h"
#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using namespace tp::gpu_test::fused_norm;  // NOLINT(google-build-using-namespace): the shared step and bounds
using tp::cpp::NormActivation;

namespace {

struct NamedActivation {
  NormActivation activation;
  const char* name;
};
constexpr NamedActivation kActivations[] = {{NormActivation::kRelu, "relu"},
                                            {NormActivation::kSilu, "silu"},
                                            {NormActivation::kHardswish, "hardswish"},
                                            {NormActivation::kNone, "none"}};

/// The bounds of the header's reasoning: y and dx against the float32 reference rounded to x's dtype.
double rounded_bound(at::ScalarType dtype) {
  if (dtype == at::kFloat) return 1e-5;
  if (dtype == at::kHalf) return 1e-4;
  return 1e-3;  // bfloat16
}
constexpr double kParameterBound = 1e-5;  // d_weight, d_bias: float32 on both sides

/// What one op pair leaves, called directly through the dispatcher on copies of bn's running
/// statistics (which the forward updates in place).
struct PairResult {
  at::Tensor y, save_mean, save_invstd, dx, grad_weight, grad_bias, running_mean, running_var;
};

/// torchhost::bn_activation_forward on x with `activation` (its int argument), into `r`.
void activation_forward(const torch::nn::BatchNorm2d& bn, const at::Tensor& x, int64_t activation, PairResult& r) {
  const at::AutoDispatchBelowADInplaceOrView below_autograd;  // as the SDK's autograd functions call them
  r.running_mean = bn->running_mean.clone();
  r.running_var = bn->running_var.clone();
  std::tie(r.y, r.save_mean, r.save_invstd) = tp::cpp::detail::fused_activation_ops()->forward.call(
      x, bn->weight, bn->bias, r.running_mean, r.running_var, *bn->options.momentum(), bn->options.eps(), activation);
}

/// bn_activation_forward then bn_activation_backward (the activation's input recomputed from x).
PairResult activation_pair(const torch::nn::BatchNorm2d& bn, const at::Tensor& x, const at::Tensor& dy,
                           int64_t activation) {
  PairResult r;
  activation_forward(bn, x, activation, r);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  std::tie(r.dx, r.grad_weight, r.grad_bias) = tp::cpp::detail::fused_activation_ops()->backward.call(
      dy, x, bn->weight, bn->bias, r.save_mean, r.save_invstd, activation);
  return r;
}

/// bn_act_forward without a residual then bn_act_backward (ReLU's mask read from the stored y).
PairResult stored_mask_pair(const torch::nn::BatchNorm2d& bn, const at::Tensor& x, const at::Tensor& dy) {
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  PairResult r;
  r.running_mean = bn->running_mean.clone();
  r.running_var = bn->running_var.clone();
  const auto* ops = tp::cpp::detail::fused_norm_ops();
  std::tie(r.y, r.save_mean, r.save_invstd) = ops->forward.call(
      x, std::nullopt, bn->weight, bn->bias, r.running_mean, r.running_var, *bn->options.momentum(), bn->options.eps());
  at::Tensor d_residual;
  std::tie(r.dx, d_residual, r.grad_weight, r.grad_bias) =
      ops->backward.call(dy, x, r.y, bn->weight, r.save_mean, r.save_invstd, /*has_residual=*/false);
  return r;
}

/// The fused forward's activation input v = fmaf(x, scale, shift) (norm_act_passes.h), float32: the
/// saved statistics from bn_activation_forward (deterministic: the SDK's call on x computes the same
/// bits), then affine_coefficients (norm_act_math.h) in double. A product of two floats is exact in
/// double, so each value takes at most two roundings in double before the kernel's one to float,
/// which changes the float only where a double lands on a float's rounding midpoint (about one
/// value in 2^28).
at::Tensor fused_activation_input(const torch::nn::BatchNorm2d& bn, const at::Tensor& x) {
  PairResult r;
  activation_forward(bn, x, static_cast<int64_t>(NormActivation::kHardswish), r);
  const at::Tensor scale = bn->weight.detach().to(at::kDouble) * r.save_invstd.to(at::kDouble);
  const at::Tensor shift = bn->bias.detach().to(at::kDouble) - r.save_mean.to(at::kDouble) * scale;
  const auto per_channel = [](const at::Tensor& t) { return t.to(at::kFloat).to(at::kDouble).view({1, -1, 1, 1}); };
  return (x.to(at::kDouble) * per_channel(scale) + per_channel(shift)).to(at::kFloat);
}

/// Which of the activation's pieces v falls on: ReLU 0 (v <= 0) or 1; Hardswish 0 (v <= -3), 1
/// (below 3) or 2; SiLU and none have one piece.
at::Tensor piece_of(const at::Tensor& v, NormActivation activation) {
  if (activation == NormActivation::kRelu) return (v > 0).to(at::kInt);
  if (activation == NormActivation::kHardswish) return (v > -3.0).to(at::kInt) + (v >= 3.0).to(at::kInt);
  return at::zeros_like(v, at::kInt);
}

/// x whose every channel has mean 3 exactly: 3 + k / 4 with k in -2..2 and the batch's second half
/// the first's k negated, so a fifth of the values sit at the mean. With bias 0 their bn(x) is a
/// rounding residue, positive, zero or negative by the last bits of the statistics and the
/// coefficients: the ReLU mask most sensitive to how the activation's input is computed.
at::Tensor values_at_the_mean(at::IntArrayRef shape, at::ScalarType dtype) {
  const at::Tensor k = at::randint(-2, 3, {shape[0] / 2, shape[1], shape[2], shape[3]},
                                   at::TensorOptions().device(at::kCUDA).dtype(at::kFloat));
  return (at::cat({k, -k}) / 4.0 + 3.0).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
}

}  // namespace

TEST_CASE("fused BatchNorm + ReLU, SiLU, Hardswish or none: forward, gradients and running statistics match the module path") {
  require_ops();
  const std::vector<std::vector<int64_t>> shapes = {{2, 64, 5, 7}, {8, 256, 14, 14}, {32, 100, 9, 9}, {64, 64, 56, 56},
                                                    {4, 3, 17, 13}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const NamedActivation& a : kActivations) {
      for (const auto& shape : shapes) {
        const at::IntArrayRef dims(shape);
        CAPTURE(dtype);
        CAPTURE(a.name);
        CAPTURE(dims);
        at::manual_seed(37);
        const torch::nn::BatchNorm2d bn = make_norm(shape[1]);
        const at::Tensor x = channels_last(shape, dtype, 2.0, 3.0);
        const at::Tensor dy = channels_last(shape, dtype, 1.0, 0.0);
        const Outcome fused = run_activation(bn, x, dy, a.activation, Path::kFused);
        CHECK(is_activation_norm_node(fused.grad_fn));

        // The fused path's pieces: ReLU's from its output, Hardswish's from its activation input.
        at::Tensor piece;
        if (a.activation == NormActivation::kRelu) piece = fused.y;
        if (a.activation == NormActivation::kHardswish) piece = fused_activation_input(bn, x);
        const at::Tensor x32 = x.to(at::kFloat);
        const Outcome reference = run_activation(bn, x32, dy.to(at::kFloat), a.activation, Path::kModule, piece);
        double flips = 0.0;
        if (piece.defined()) {
          at::Tensor z;
          {
            const torch::NoGradGuard no_grad;
            z = copy_of(bn)->forward(x32);  // the float32 module path's own activation input
          }
          flips = piece_of(z, a.activation).ne(piece_of(piece, a.activation)).to(at::kDouble).mean().item<double>();
        }
        const double y_error = relative_l2(fused.y, reference.y.to(dtype));
        const double dx_error = relative_l2(fused.dx, reference.dx.to(dtype));
        MESSAGE("y " << y_error << ", dx " << dx_error << ", dweight "
                     << relative_l2(fused.d_weight, reference.d_weight) << ", dbias "
                     << relative_l2(fused.d_bias, reference.d_bias) << ", piece flips " << flips);
        CHECK(flips <= bounds_for(dtype).mask_flips);  // a 16-bit value on a kink flips all its copies
        CHECK(y_error <= rounded_bound(dtype));
        CHECK(dx_error <= rounded_bound(dtype));
        CHECK(relative_l2(fused.d_weight, reference.d_weight) <= kParameterBound);
        CHECK(relative_l2(fused.d_bias, reference.d_bias) <= kParameterBound);
        CHECK(max_abs_diff(fused.running_mean, reference.running_mean) <= 1e-5);
        CHECK(max_abs_diff(fused.running_var, reference.running_var) <=
              1e-5 * std::max(1.0, reference.running_var.abs().max().item<double>()));
        CHECK(at::equal(fused.batches, reference.batches));
        CHECK(fused.y.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK((fused.y.scalar_type() == dtype));
        CHECK((fused.dx.scalar_type() == dtype));
      }
    }
  }
}

TEST_CASE("the ReLU mask recomputed from x is the stored one: both op pairs give the same bits") {
  require_ops();
  const std::vector<std::vector<int64_t>> shapes = {{8, 64, 14, 14}, {4, 3, 17, 13}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const auto& shape : shapes) {
      for (const bool at_the_mean : {false, true}) {
        const at::IntArrayRef dims(shape);
        CAPTURE(dtype);
        CAPTURE(dims);
        CAPTURE(at_the_mean);
        at::manual_seed(41);
        torch::nn::BatchNorm2d bn = make_norm(shape[1]);
        if (at_the_mean) {
          const torch::NoGradGuard no_grad;
          bn->bias.zero_();
        }
        const at::Tensor x = at_the_mean ? values_at_the_mean(shape, dtype) : channels_last(shape, dtype, 2.0, 3.0);
        const at::Tensor dy = channels_last(shape, dtype, 1.0, 0.0);
        const PairResult stored = stored_mask_pair(bn, x, dy);
        const PairResult recomputed = activation_pair(bn, x, dy, static_cast<int64_t>(NormActivation::kRelu));
        if (at_the_mean)
          MESSAGE("values at the mean passed by the mask: "
                  << (stored.y > 0).logical_and(x == 3.0).sum().item<int64_t>() << " of "
                  << (x == 3.0).sum().item<int64_t>());
        // grad_bias is the sum of the gradient the mask passes, in the same order on both sides:
        // equal exactly when the masks are. dx and grad_weight also need the two backward
        // instantiations to contract their multiply-adds alike.
        CHECK(at::equal(stored.y, recomputed.y));
        CHECK(at::equal(stored.save_mean, recomputed.save_mean));
        CHECK(at::equal(stored.save_invstd, recomputed.save_invstd));
        CHECK(at::equal(stored.running_mean, recomputed.running_mean));
        CHECK(at::equal(stored.running_var, recomputed.running_var));
        CHECK(at::equal(stored.dx, recomputed.dx));
        CHECK(at::equal(stored.grad_weight, recomputed.grad_weight));
        CHECK(at::equal(stored.grad_bias, recomputed.grad_bias));
      }
    }
  }
}

TEST_CASE("the activation ops refuse an activation they do not know and a backward without the bias") {
  require_ops();
  at::manual_seed(53);
  const torch::nn::BatchNorm2d bn = make_norm(16);
  const at::Tensor x = channels_last({2, 16, 4, 4}, at::kFloat, 1.0, 0.0);
  PairResult r;
  try {
    activation_forward(bn, x, 4, r);
    FAIL("activation 4 was accepted");
  } catch (const c10::Error& e) {
    CHECK(std::string(e.what()).find("activation must be 0 (ReLU), 1 (none), 2 (SiLU) or 3 (Hardswish), got 4") !=
          std::string::npos);
  }
  activation_forward(bn, x, static_cast<int64_t>(NormActivation::kSilu), r);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  try {
    tp::cpp::detail::fused_activation_ops()->backward.call(x, x, bn->weight, at::Tensor(), r.save_mean, r.save_invstd,
                                                           static_cast<int64_t>(NormActivation::kSilu));
    FAIL("a backward without the bias was accepted");
  } catch (const c10::Error& e) {
    CHECK(std::string(e.what()).find("bias must be the forward's BatchNorm bias") != std::string::npos);
  }
}

TEST_CASE("fused BatchNorm + SiLU: two runs give the same bits") {
  require_ops();
  at::manual_seed(43);
  const torch::nn::BatchNorm2d bn = make_norm(256);
  const at::Tensor x = channels_last({32, 256, 28, 28}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor dy = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  const Outcome first = run_activation(bn, x, dy, NormActivation::kSilu, Path::kFused);
  CHECK(is_activation_norm_node(first.grad_fn));
  CHECK(same_bits(first, run_activation(bn, x, dy, NormActivation::kSilu, Path::kFused)));
}

TEST_CASE("fused BatchNorm + SiLU is captured in a CUDA graph: one replay gives the eager step") {
  require_ops();
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  at::manual_seed(47);
  const torch::nn::BatchNorm2d bn = make_norm(128);
  const at::Tensor x = channels_last({16, 128, 14, 14}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor dy = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  check_graph_replay_is_eager(
      bn, {x}, dy,
      [](torch::nn::BatchNorm2d& b, const std::vector<at::Tensor>& in) {
        return tp::cpp::batch_norm_act(b, in[0], NormActivation::kSilu);
      },
      is_activation_norm_node);
#endif
}

TEST_CASE("batch_norm_act keeps the module path, bit for bit, in eval, on NCHW input, with allow_fused = false and momentum = None") {
  require_ops();
  at::manual_seed(59);
  const torch::nn::BatchNorm2d bn = make_norm(64);
  const at::Tensor x = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.5);
  for (const NamedActivation& a : kActivations) {
    CAPTURE(a.name);
    check_module_path_kept(
        bn, x,
        [&a](torch::nn::BatchNorm2d& b, const at::Tensor& in, bool allow_fused) {
          return tp::cpp::batch_norm_act(b, in, a.activation, allow_fused);
        },
        [&a](torch::nn::BatchNorm2d& b, const at::Tensor& in) { return module_activation(b->forward(in), a.activation); });
  }
}

TEST_CASE("batch_norm_act's fused path refuses a double backward with a message") {
  require_ops();
  at::manual_seed(61);
  for (const NamedActivation& a : kActivations) {
    CAPTURE(a.name);
    torch::nn::BatchNorm2d bn = make_norm(32);
    const at::Tensor x = channels_last({4, 32, 6, 6}, at::kFloat, 1.0, 0.5).requires_grad_();
    const at::Tensor y = tp::cpp::batch_norm_act(bn, x, a.activation);
    REQUIRE(is_activation_norm_node(y.grad_fn()->name()));
    const at::Tensor loss = (y * y).sum();  // a non-constant dy, so a second derivative would not vanish
    try {
      torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
      FAIL("a double backward through batch_norm_act's fused path was not refused");
    } catch (const c10::Error& e) {
      CHECK(std::string(e.what()).find("not twice differentiable") != std::string::npos);
    }
    CHECK(torch::autograd::grad({loss}, {x})[0].defined());
  }
}
