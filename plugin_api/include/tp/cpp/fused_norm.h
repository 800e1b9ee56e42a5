// torchhost C++ helpers for Tier T model authors: BatchNorm (training) + ReLU, BatchNorm +
// residual add + ReLU, BatchNorm + SiLU or Hardswish, and BatchNorm alone in one CUDA kernel pass
// each way, through ops the host registers (torchhost::bn_act_forward / bn_act_backward,
// bn_activation_forward / bn_activation_backward and bn_forward / bn_backward, framework/src/ops).
// The plugin never links the framework: the ops are looked up by name in c10's dispatcher, and
// where they are missing (a CPU host, a host built without a CUDA compiler, an older host) the
// module path runs instead.
//
//   at::Tensor out = tp::cpp::batch_norm_relu(bn1_, conv1_->forward(x));            // relu(bn1(conv1(x)))
//   return tp::cpp::batch_norm_relu(bn2_, conv2_->forward(out), identity, fused_);  // relu(bn2(.) + identity)
//   at::Tensor identity = tp::cpp::batch_norm(down_bn_, down_conv_->forward(x), fused_);  // bn(conv(x))
//   h = tp::cpp::batch_norm_act(bn_, conv_->forward(h), tp::cpp::NormActivation::kSilu, fused_);  // silu(bn(conv(h)))
//
// Thread tag: any (the lookup is a function-local static; the ops run on the current CUDA stream).
#ifndef TP_CPP_FUSED_NORM_H
#define TP_CPP_FUSED_NORM_H

#ifndef TP_PLUGIN_TIER_T
#define TP_PLUGIN_TIER_T 1
#endif

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/silu.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/modules/batchnorm.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace tp::cpp {

/// The activation batch_norm_act applies after BatchNorm. The values are the host ops' `activation`
/// argument (framework/src/ops/norm_act_math.h's Activation): never renumbered.
enum class NormActivation : int64_t {
  kRelu = 0,       ///< at::relu
  kNone = 1,       ///< BatchNorm alone
  kSilu = 2,       ///< at::silu (EfficientNet's)
  kHardswish = 3,  ///< at::hardswish (MobileNetV3's)
};

namespace detail {

/// A forward and backward op of the host's, typed as norm_act_ops.cpp registers them (schemas
/// there).
template <class ForwardSignature, class BackwardSignature>
struct FusedOpPair {
  using Forward = ForwardSignature;
  using Backward = BackwardSignature;
  c10::TypedOperatorHandle<Forward> forward;
  c10::TypedOperatorHandle<Backward> backward;
};

/// The ops `forward` and `backward` when this process's host registered both with a CUDA kernel
/// and `Pair`'s C++ types; nothing otherwise (a CPU host, an older host, other types).
template <class Pair>
std::optional<Pair> find_fused_ops(const char* forward, const char* backward) {
  try {
    auto& dispatcher = c10::Dispatcher::singleton();
    const auto f = dispatcher.findSchema({forward, ""});
    const auto b = dispatcher.findSchema({backward, ""});
    if (!f || !b || !f->hasKernelForDispatchKey(c10::DispatchKey::CUDA) ||
        !b->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
      return std::nullopt;
    return Pair{f->template typed<typename Pair::Forward>(), b->template typed<typename Pair::Backward>()};
  } catch (const c10::Error&) {
    return std::nullopt;  // registered with other C++ types (another host version): the module path
  }
}

/// BatchNorm + [residual add +] ReLU: torchhost::bn_act_forward / bn_act_backward.
using FusedNormOps = FusedOpPair<
    std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const std::optional<at::Tensor>&,
                                                   const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, double, double),
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                               const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                               bool)>;

/// The BatchNorm + ReLU ops, or nullptr. Looked up once: the host registers them before it loads
/// any plugin.
inline const FusedNormOps* fused_norm_ops() {
  static const std::optional<FusedNormOps> ops =
      find_fused_ops<FusedNormOps>("torchhost::bn_act_forward", "torchhost::bn_act_backward");
  return ops ? &*ops : nullptr;
}

/// BatchNorm alone: torchhost::bn_forward / bn_backward.
using FusedBatchNormOps = FusedOpPair<
    std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, const at::Tensor&, double, double),
    std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, const at::Tensor&)>;

/// The BatchNorm-alone ops, or nullptr; looked up apart from fused_norm_ops(), so a host older than
/// them still fuses batch_norm_relu.
inline const FusedBatchNormOps* fused_batch_norm_ops() {
  static const std::optional<FusedBatchNormOps> ops =
      find_fused_ops<FusedBatchNormOps>("torchhost::bn_forward", "torchhost::bn_backward");
  return ops ? &*ops : nullptr;
}

/// BatchNorm + an activation, no residual, the backward recomputing the activation's input from x:
/// torchhost::bn_activation_forward / bn_activation_backward.
using FusedActivationOps = FusedOpPair<
    std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, const at::Tensor&, double, double, int64_t),
    std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t)>;

/// The BatchNorm + activation ops, or nullptr; looked up apart from the others, so an older host
/// that lacks them still fuses batch_norm_relu (through bn_act_*) and batch_norm.
inline const FusedActivationOps* fused_activation_ops() {
  static const std::optional<FusedActivationOps> ops =
      find_fused_ops<FusedActivationOps>("torchhost::bn_activation_forward", "torchhost::bn_activation_backward");
  return ops ? &*ops : nullptr;
}

/// The autograd node of the fused path. Gradients for x, residual, weight and bias; none for the
/// running statistics (updated in place by forward) or the scalars. Not twice differentiable.
struct BatchNormReluFunction : torch::autograd::Function<BatchNormReluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const std::optional<at::Tensor>& residual, const at::Tensor& weight, const at::Tensor& bias,
                            const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [y, save_mean, save_invstd] =
        fused_norm_ops()->forward.call(x, residual, weight, bias, running_mean, running_var, momentum, eps);
    ctx->save_for_backward({x, y, weight, save_mean, save_invstd});
    // An optional that holds an undefined tensor is no residual (the op reads it as none).
    ctx->saved_data["has_residual"] = residual.has_value() && residual->defined();
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    // The backward op has no derivative of its own: under create_graph (a gradient penalty, double
    // backward) its results would be leaves and the second derivative silently zero.
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "tp::cpp::batch_norm_relu's fused path is not twice differentiable; for a double backward "
                "(create_graph = true) build the model with its fused option off (the zoo's fused_norm = false) "
                "or pass allow_fused = false");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const bool has_residual = ctx->saved_data["has_residual"].toBool();
    // The next layer's backward may hand any layout (or a broadcast); the op reads rows of channels.
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    auto [dx, d_residual, grad_weight, grad_bias] =
        fused_norm_ops()->backward.call(dy, x, saved[1], saved[2], saved[3], saved[4], has_residual);
    return {dx,           has_residual ? d_residual : at::Tensor(), grad_weight, grad_bias, at::Tensor(),
            at::Tensor(), at::Tensor(),                             at::Tensor()};
  }
};

/// The autograd node of batch_norm's fused path. Gradients for x, weight and bias; none for the
/// running statistics (updated in place by forward) or the scalars. Not twice differentiable.
struct BatchNormFunction : torch::autograd::Function<BatchNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                            double momentum, double eps) {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [y, save_mean, save_invstd] =
        fused_batch_norm_ops()->forward.call(x, weight, bias, running_mean, running_var, momentum, eps);
    ctx->save_for_backward({x, weight, save_mean, save_invstd});  // no y: without an activation dx needs no mask
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    // As BatchNormReluFunction's: the backward op has no derivative of its own.
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "tp::cpp::batch_norm's fused path is not twice differentiable; for a double backward "
                "(create_graph = true) build the model with its fused option off (the zoo's fused_norm = false) "
                "or pass allow_fused = false");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    auto [dx, grad_weight, grad_bias] = fused_batch_norm_ops()->backward.call(dy, x, saved[1], saved[2], saved[3]);
    return {dx, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

/// The autograd node of batch_norm_act's fused path (and batch_norm_relu's without a residual).
/// Saves x, not y: the backward recomputes the activation's input from x, weight, bias and the
/// saved statistics. Gradients for x, weight and bias. Not twice differentiable.
struct BatchNormActivationFunction : torch::autograd::Function<BatchNormActivationFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                            double momentum, double eps, int64_t activation) {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [y, save_mean, save_invstd] =
        fused_activation_ops()->forward.call(x, weight, bias, running_mean, running_var, momentum, eps, activation);
    ctx->save_for_backward({x, weight, bias, save_mean, save_invstd});
    ctx->saved_data["activation"] = activation;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    // As BatchNormReluFunction's: the backward op has no derivative of its own.
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "tp::cpp::batch_norm_act's (and batch_norm_relu's without a residual) fused path is not twice "
                "differentiable; for a double backward "
                "(create_graph = true) build the model with its fused option off (the zoo's fused_norm = false) "
                "or pass allow_fused = false");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    auto [dx, grad_weight, grad_bias] = fused_activation_ops()->backward.call(
        dy, x, saved[1], saved[2], saved[3], saved[4], ctx->saved_data["activation"].toInt());
    return {dx, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

inline bool fusable_dtype(const at::Tensor& t) {
  const auto type = t.scalar_type();
  return type == at::kFloat || type == at::kBFloat16 || type == at::kHalf;
}

inline bool float32_on(const at::Tensor& t, const at::Tensor& x) {
  return t.defined() && t.scalar_type() == at::kFloat && t.device() == x.device();
}

/// What both fused paths need of `bn` and `x` (see batch_norm_relu's contract).
inline bool fusable_norm(const torch::nn::BatchNorm2dImpl& bn, const at::Tensor& x) {
  if (!bn.is_training() || !bn.options.affine() || !bn.options.track_running_stats() || !bn.options.momentum())
    return false;
  if (!x.defined() || !x.is_cuda() || x.dim() != 4 || !fusable_dtype(x) ||
      !x.is_contiguous(at::MemoryFormat::ChannelsLast) || x.size(1) < 1 || x.numel() / x.size(1) < 2)
    return false;
  return float32_on(bn.weight, x) && float32_on(bn.bias, x) && float32_on(bn.running_mean, x) &&
         float32_on(bn.running_var, x) && bn.weight.numel() == x.size(1);
}

/// Whether `residual` (undefined: none) may join x in batch_norm_relu's fused path.
inline bool fusable_residual(const at::Tensor& x, const at::Tensor& residual) {
  return !residual.defined() ||
         (residual.device() == x.device() && residual.sizes() == x.sizes() && residual.scalar_type() == x.scalar_type() &&
          residual.is_contiguous(at::MemoryFormat::ChannelsLast));
}

/// What BatchNorm2d's forward does to num_batches_tracked in training, for the fused paths.
inline void count_batch(torch::nn::BatchNorm2d& bn) {
  if (bn->num_batches_tracked.defined()) bn->num_batches_tracked += 1;
}

/// act(bn(x)) through torchhost::bn_activation_* (the caller checked fusable_norm and the ops).
inline at::Tensor fused_batch_norm_activation(torch::nn::BatchNorm2d& bn, const at::Tensor& x, NormActivation activation) {
  count_batch(bn);
  return BatchNormActivationFunction::apply(x, bn->weight, bn->bias, bn->running_mean, bn->running_var,
                                            *bn->options.momentum(), bn->options.eps(), static_cast<int64_t>(activation));
}

}  // namespace detail

/// relu(bn(x) + residual), or relu(bn(x)) when `residual` is undefined: what
/// `bn->forward(x)`, `+= residual`, `relu_()` compute, BatchNorm's side effects included (in
/// training: running_mean and running_var updated, num_batches_tracked bumped). Never modifies
/// `x` or `residual`, so it may run inside an activation-checkpointing unit.
///
/// Fused (the host's CUDA ops, one pass each way plus the statistics) only when all hold:
/// `allow_fused`; `bn` is training (frozen BatchNorm, model.freeze_bn_stats, and eval run the module
/// path) with affine parameters, running statistics and a momentum (momentum = None, the
/// cumulative average, runs the module path); x is a 4-d CUDA float32, bfloat16 or float16 tensor
/// contiguous in channels-last memory with more than one value per channel; bn's parameters and
/// statistics are float32 on x's device (autocast leaves them so); `residual`, if defined, has x's
/// sizes, dtype, device and layout; and the host registered the ops. Otherwise it runs the module
/// path and its result is bit for bit the module code's.
///
/// Fused results differ from the module path's by rounding only: statistics and arithmetic are fp32
/// (variance combined in double), the output rounded once to x's dtype where the module path
/// rounds after BatchNorm and again after the add. So y agrees to about 2e-7 relative in float32
/// and a few units in the last place in bfloat16/float16, running statistics to about 1e-7; and
/// where bn(x) + residual is within a rounding of zero, the two paths' ReLUs may disagree (with a
/// residual in bfloat16, about 1 element in 1,000), and there the gradient passes in one path and
/// not the other. Where the masks agree, gradients agree to about 1e-5 (float32, float16) and 1e-2
/// (bfloat16) relative (L2 norm of the difference over the reference's). Deterministic: the same inputs on the same device give the same bits.
/// The fused path is captured in CUDA graphs like any op (no host synchronisation).
inline at::Tensor batch_norm_relu(torch::nn::BatchNorm2d& bn, const at::Tensor& x, const at::Tensor& residual = {},
                                  bool allow_fused = true) {
  if (allow_fused && detail::fusable_norm(*bn, x) && detail::fusable_residual(x, residual)) {
    // Without a residual, the pair whose backward recomputes the mask from x reads one tensor less.
    if (!residual.defined() && detail::fused_activation_ops() != nullptr)
      return detail::fused_batch_norm_activation(bn, x, NormActivation::kRelu);
    if (detail::fused_norm_ops() != nullptr) {
      detail::count_batch(bn);
      const std::optional<at::Tensor> r = residual.defined() ? std::optional<at::Tensor>(residual) : std::nullopt;
      return detail::BatchNormReluFunction::apply(x, r, bn->weight, bn->bias, bn->running_mean, bn->running_var,
                                                  *bn->options.momentum(), bn->options.eps());
    }
  }
  at::Tensor out = bn->forward(x);
  if (residual.defined()) out += residual;  // in place on BatchNorm's fresh output only
  return out.relu_();
}

/// bn(x): what `bn->forward(x)` computes, side effects included (in training: running_mean and
/// running_var updated, num_batches_tracked bumped), for a BatchNorm that no activation follows
/// (ResNet's downsample branch). Never modifies `x`.
///
/// Fused (the host's torchhost::bn_forward / bn_backward: the statistics, then one pass each way)
/// under batch_norm_relu's conditions less the residual: `allow_fused`; `bn` training with affine
/// parameters, running statistics and a momentum; x a 4-d CUDA float32, bfloat16 or float16 tensor
/// contiguous in channels-last memory with more than one value per channel; bn's parameters and
/// statistics float32 on x's device; and the host registered these two ops (looked up apart from
/// batch_norm_relu's: an older host fuses that one and runs this one's module path). Otherwise it
/// runs `bn->forward(x)` and its result is bit for bit the module's.
///
/// Fused results differ from the module path's by rounding only, by the same argument as
/// batch_norm_relu's: statistics and arithmetic in fp32 (variance combined in double), y rounded
/// once to x's dtype, as the module path rounds it once. With no ReLU there is no mask to disagree,
/// so y agrees to about 2e-7 relative in float32 and a few units in the last place in
/// bfloat16/float16, running statistics to about 1e-7, and gradients to about 1e-5 (float32,
/// float16) and 1e-2 (bfloat16) relative (L2 norm of the difference over the reference's).
/// Deterministic (the same inputs on the same device give the same bits), captured in CUDA graphs
/// like any op, and, like batch_norm_relu's, not twice differentiable (a double backward through
/// the fused path fails with a message; allow_fused = false runs the module path, which is).
inline at::Tensor batch_norm(torch::nn::BatchNorm2d& bn, const at::Tensor& x, bool allow_fused = true) {
  if (allow_fused && detail::fusable_norm(*bn, x) && detail::fused_batch_norm_ops() != nullptr) {
    detail::count_batch(bn);
    return detail::BatchNormFunction::apply(x, bn->weight, bn->bias, bn->running_mean, bn->running_var,
                                            *bn->options.momentum(), bn->options.eps());
  }
  return bn->forward(x);
}

/// act(bn(x)) for `activation` ReLU, SiLU, Hardswish or none: what `bn->forward(x)` followed by
/// at::relu / at::silu / at::hardswish computes, BatchNorm's side effects included (in training:
/// running_mean and running_var updated, num_batches_tracked bumped). Never modifies `x`.
///
/// Fused (the host's torchhost::bn_activation_forward / bn_activation_backward: the statistics,
/// then one pass each way; the backward reads dy and x only, recomputing the activation's input)
/// under batch_norm's conditions: `allow_fused`; `bn` training with affine parameters, running
/// statistics and a momentum; x a 4-d CUDA float32, bfloat16 or float16 tensor contiguous in
/// channels-last memory with more than one value per channel; bn's parameters and statistics
/// float32 on x's device; and the host registered these two ops (looked up apart from the others).
/// With kNone and a host that has only bn_forward / bn_backward, that pair runs (batch_norm).
/// Otherwise the module path runs, bit for bit the module code's.
///
/// Fused results differ from the module path's by rounding only: the module path rounds BatchNorm's
/// output to x's dtype and applies the activation to that (and rounds the activation's gradient
/// before BatchNorm's backward); the fused path works in fp32 and rounds once. So the fused path is
/// the nearer of the two to the float32 computation: against the module path in float32 on the same
/// values, y and dx agree to about 1e-5 (float32), 1e-4 (float16) and 1e-3 (bfloat16) relative (L2
/// norm of the difference over the reference's), weight and bias gradients and running statistics
/// to about 1e-5. Against the module path in float16/bfloat16 the gap is that path's own rounding:
/// about 4e-4 (SiLU) and 5e-3 (Hardswish, whose gradient jumps at -3 and 3) in float16, up to 2e-2
/// in bfloat16. For ReLU, where bn(x) is within a rounding of zero the masks may disagree (as
/// batch_norm_relu's).
/// Deterministic, captured in CUDA graphs like any op, and not twice differentiable (a double
/// backward through the fused path fails with a message; allow_fused = false runs the module path).
inline at::Tensor batch_norm_act(torch::nn::BatchNorm2d& bn, const at::Tensor& x, NormActivation activation,
                                 bool allow_fused = true) {
  if (activation == NormActivation::kRelu) return batch_norm_relu(bn, x, {}, allow_fused);
  if (allow_fused && detail::fusable_norm(*bn, x) && detail::fused_activation_ops() != nullptr)
    return detail::fused_batch_norm_activation(bn, x, activation);
  switch (activation) {
    case NormActivation::kSilu: return at::silu(bn->forward(x));
    case NormActivation::kHardswish: return at::hardswish(bn->forward(x));
    default: return batch_norm(bn, x, allow_fused);
  }
}

}  // namespace tp::cpp

#endif  // TP_CPP_FUSED_NORM_H
