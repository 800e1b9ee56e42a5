// torchhost C++ helpers for Tier T plugin authors: activation checkpointing.
//
// LibTorch's C++ API has no torch.utils.checkpoint, so this header provides one. A checkpointed
// block runs its forward without recording autograd history and keeps only its inputs; in
// backward it runs the forward again, with history, and back-propagates through that. Activation
// memory drops to the blocks' inputs, and a training step costs about one more forward pass.
//
//   class Net : public torch::nn::Module, public tp::cpp::Checkpointable {
//     at::Tensor forward(at::Tensor x) {
//       for (size_t i = 0; i < convs_.size(); ++i)        // capture by value: fn lives until backward
//         x = checkpoint_block({*convs_[i], *norms_[i]}, [this, i](const at::Tensor& in) {
//           return norms_[i]->forward(convs_[i]->forward(in)).relu();
//         }, x);
//       return x;
//     }
//   };
//   // Registered through tp/cpp/model_adapter.h, the class's set_activation_checkpointing fills
//   // the table's entry. A hand-written tp_model_v1_t table (as_net(self) returns the Net of an
//   // instance, or throws) ends with: &tp::cpp::set_activation_checkpointing_entry<&as_net>
//
// What a block may be (plugin_api/README.md, "Activation checkpointing"): its outputs are a
// function of its inputs, its parameters, the RNG state and the autocast state only; it never
// modifies its inputs in place; every tensor it reads that needs a gradient is an input or a
// parameter of the CheckpointBlock. Buffers of the block are snapshot before the recompute and
// restored after it, so BatchNorm's running statistics are updated once per step, not twice.
//
// Thread tag: [main] (forward) and the autograd engine's threads (backward); one block instance
// is never recomputed concurrently by the engine.
#ifndef TP_CPP_ACTIVATION_CHECKPOINT_H
#define TP_CPP_ACTIVATION_CHECKPOINT_H

#ifndef TP_PLUGIN_TIER_T
#define TP_PLUGIN_TIER_T 1
#endif

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/module.h>

#include <array>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/status.h"

namespace tp::cpp {

/// What a checkpointed block owns besides its inputs: the parameters that receive gradients
/// through the recompute, the buffers its forward may update (restored after the recompute), and
/// whether it is training. Built per call; cheap (a few vector entries).
///
/// Example:
///   tp::cpp::CheckpointBlock{*conv, *bn}        // two modules
///   tp::cpp::CheckpointBlock(*this)             // a whole module, recursively
///   tp::cpp::CheckpointBlock().add_parameter(w) // a bare function of its inputs and `w`
class CheckpointBlock {
 public:
  /// No parameters or buffers; training() is true.
  CheckpointBlock() = default;
  /// Every parameter (recursively; those with requires_grad) and defined buffer of `modules`;
  /// training() when any of them is training.
  CheckpointBlock(std::initializer_list<std::reference_wrapper<const torch::nn::Module>> modules) {
    for (const torch::nn::Module& m : modules) add(m);
  }
  /// One module, recursively (implicit, so `checkpointed(*module, fn, x)` reads naturally).
  CheckpointBlock(const torch::nn::Module& module) { add(module); }  // NOLINT(google-explicit-constructor)

  /// Adds `module`'s parameters and buffers (recursively) and its training flag.
  CheckpointBlock& add(const torch::nn::Module& module) {
    for (const at::Tensor& p : module.parameters(/*recurse=*/true)) add_parameter(p);
    for (const at::Tensor& b : module.buffers(/*recurse=*/true)) add_buffer(b);
    training_ = has_module_ ? (training_ || module.is_training()) : module.is_training();
    has_module_ = true;
    return *this;
  }
  /// A leaf tensor the block reads that should receive a gradient; ignored unless it requires
  /// grad. Duplicates are ignored (a shared weight gets its gradient once).
  CheckpointBlock& add_parameter(const at::Tensor& parameter) {
    if (parameter.defined() && parameter.requires_grad() && !contains(parameters_, parameter))
      parameters_.push_back(parameter);
    return *this;
  }
  /// A tensor the block's forward may update in place (running statistics); restored to its
  /// value before the recompute after the recompute. Costs one copy per recompute.
  CheckpointBlock& add_buffer(const at::Tensor& buffer) {
    if (buffer.defined() && !contains(buffers_, buffer)) buffers_.push_back(buffer);
    return *this;
  }
  /// Overrides the training flag (for blocks built without modules).
  CheckpointBlock& set_training(bool training) {
    training_ = training;
    has_module_ = true;
    return *this;
  }

  const std::vector<at::Tensor>& parameters() const noexcept { return parameters_; }
  const std::vector<at::Tensor>& buffers() const noexcept { return buffers_; }
  bool training() const noexcept { return training_; }

 private:
  static bool contains(const std::vector<at::Tensor>& list, const at::Tensor& t) {
    for (const at::Tensor& x : list)
      if (x.is_same(t)) return true;
    return false;
  }
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> buffers_;
  bool training_ = true;
  bool has_module_ = false;
};

/// A type-erased block: outputs from inputs, both in the order the caller uses.
using BlockFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

namespace detail {

/// The default generators' states: CPU always, plus each device (CUDA) that an input lives on.
struct RngStates {
  at::Tensor cpu;
  std::vector<std::pair<at::Device, at::Tensor>> devices;

  static RngStates capture(const std::vector<at::Tensor>& inputs) {
    RngStates s;
    s.cpu = get(at::Device(at::kCPU));
    for (const at::Tensor& t : inputs) {
      if (!t.defined() || !t.is_cuda()) continue;
      bool seen = false;
      for (const auto& d : s.devices) seen = seen || d.first == t.device();
      if (!seen) s.devices.emplace_back(t.device(), get(t.device()));
    }
    return s;
  }
  /// The current states of the same generators as `other`.
  static RngStates capture_like(const RngStates& other) {
    RngStates s;
    s.cpu = get(at::Device(at::kCPU));
    for (const auto& d : other.devices) s.devices.emplace_back(d.first, get(d.first));
    return s;
  }
  void restore() const {
    set(at::Device(at::kCPU), cpu);
    for (const auto& d : devices) set(d.first, d.second);
  }

 private:
  static at::Tensor get(const at::Device& device) {
    at::Generator gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.get_state();
  }
  static void set(const at::Device& device, const at::Tensor& state) {
    at::Generator gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
};

/// The thread's autocast switches for CPU and CUDA. Backward may run on another thread (the
/// engine's device threads), so the recompute re-applies what the forward saw.
struct AutocastState {
  struct Entry {
    at::DeviceType type;
    bool enabled;
    at::ScalarType dtype;
  };
  std::array<Entry, 2> entries{};
  bool cache_enabled = true;

  static AutocastState capture() {
    AutocastState s;
    const std::array<at::DeviceType, 2> types = {at::kCPU, at::kCUDA};
    for (std::size_t i = 0; i < types.size(); ++i)
      s.entries[i] = {types[i], at::autocast::is_autocast_enabled(types[i]),
                      at::autocast::get_autocast_dtype(types[i])};
    s.cache_enabled = at::autocast::is_autocast_cache_enabled();
    return s;
  }
  void apply() const {
    for (const Entry& e : entries) {
      at::autocast::set_autocast_dtype(e.type, e.dtype);
      at::autocast::set_autocast_enabled(e.type, e.enabled);
    }
    at::autocast::set_autocast_cache_enabled(cache_enabled);
  }
  bool any_enabled() const {
    for (const Entry& e : entries)
      if (e.enabled) return true;
    return false;
  }
};

/// What the autograd node keeps besides the saved inputs (held as an IValue capsule in the
/// node's context).
struct CheckpointState : torch::CustomClassHolder {
  BlockFunction fn;
  std::vector<at::Tensor> parameters;
  std::vector<at::Tensor> buffers;
  RngStates rng;
  AutocastState autocast;
};

constexpr const char* kStateKey = "tp.checkpoint";

/// Sets the recompute's RNG, autocast and buffers up, and puts back what was there before.
class RecomputeScope {
 public:
  explicit RecomputeScope(const CheckpointState& s)
      : buffers_(s.buffers), rng_before_(RngStates::capture_like(s.rng)),
        autocast_before_(AutocastState::capture()) {
    {
      at::NoGradGuard no_grad;
      buffers_before_.reserve(buffers_.size());
      for (const at::Tensor& b : buffers_) buffers_before_.push_back(b.clone());
    }
    s.rng.restore();
    s.autocast.apply();
    nested_ = s.autocast.any_enabled();
    if (nested_) at::autocast::increment_nesting();
  }
  /// Puts the buffers back to their values before the recompute. Call it after the recompute's
  /// backward: BatchNorm's backward node saves the running statistics, and the copy bumps their
  /// version counters. The destructor does it if an error came first.
  void restore_buffers() {
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < buffers_before_.size(); ++i) buffers_[i].copy_(buffers_before_[i]);
    buffers_before_.clear();
  }
  ~RecomputeScope() {
    try {
      restore_buffers();
      if (nested_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
      autocast_before_.apply();
      rng_before_.restore();
    } catch (...) {  // a destructor must not throw; the states were valid when captured
    }
  }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  const std::vector<at::Tensor>& buffers_;
  RngStates rng_before_;
  AutocastState autocast_before_;
  std::vector<at::Tensor> buffers_before_;
  bool nested_ = false;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                c10::intrusive_ptr<CheckpointState> state,
                                                at::TensorList inputs, at::TensorList parameters) {
    (void)parameters;  // inputs of the node only, so that gradients reach them; read by fn
    std::vector<at::Tensor> outputs = state->fn(inputs.vec());
    std::vector<at::Tensor> non_differentiable;
    for (const at::Tensor& out : outputs) {
      TORCH_CHECK(out.defined(), "tp::cpp::checkpointed: the block returned an undefined tensor");
      if (!out.is_floating_point() && !out.is_complex()) non_differentiable.push_back(out);
    }
    if (!non_differentiable.empty()) ctx->mark_non_differentiable(non_differentiable);
    ctx->save_for_backward(inputs.vec());
    ctx->set_materialize_grads(false);
    ctx->saved_data[kStateKey] = at::IValue::make_capsule(std::move(state));
    return outputs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "tp::cpp::checkpointed does not support double backward (create_graph=true)");
    const c10::intrusive_ptr<torch::CustomClassHolder> holder = ctx->saved_data.at(kStateKey).toCapsule();
    const auto& state = static_cast<const CheckpointState&>(*holder);
    // Unpacking checks the inputs' version counters: a block input modified in place after the
    // forward fails here with LibTorch's "modified by an inplace operation" message.
    const std::vector<at::Tensor> saved = ctx->get_saved_variables();

    std::vector<at::Tensor> detached;
    detached.reserve(saved.size());
    for (const at::Tensor& x : saved) detached.push_back(x.detach().requires_grad_(x.requires_grad()));

    std::vector<at::Tensor> outputs;
    std::vector<at::Tensor> grads;
    std::vector<at::Tensor> targets;  // detached inputs, then parameters, that need gradients
    std::vector<at::Tensor> target_grads;
    {
      RecomputeScope scope(state);
      {
        at::AutoGradMode enable_grad(true);
        outputs = state.fn(detached);
      }
      TORCH_CHECK(outputs.size() == grad_outputs.size(), "tp::cpp::checkpointed: the recompute returned ",
                  outputs.size(), " tensors, the forward ", grad_outputs.size(),
                  "; the block must be deterministic in its structure");
      std::vector<at::Tensor> roots;
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        if (!grad_outputs[i].defined() || !outputs[i].requires_grad()) continue;
        roots.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
      for (const at::Tensor& x : detached)
        if (x.requires_grad()) targets.push_back(x);
      for (const at::Tensor& p : state.parameters) targets.push_back(p);
      if (!roots.empty() && !targets.empty())
        target_grads = torch::autograd::grad(roots, targets, grads, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true);
      scope.restore_buffers();
    }

    // One gradient per forward argument: none for the state, then inputs, then parameters.
    torch::autograd::variable_list result;
    result.reserve(1 + detached.size() + state.parameters.size());
    result.emplace_back();
    std::size_t next = 0;
    for (const at::Tensor& x : detached)
      result.push_back(x.requires_grad() && next < target_grads.size() ? target_grads[next++] : at::Tensor());
    for (std::size_t i = 0; i < state.parameters.size(); ++i)
      result.push_back(next < target_grads.size() ? target_grads[next++] : at::Tensor());
    return result;
  }
};

/// Conversions between a block's return type and the tensor list the autograd node handles.
template <typename R>
struct BlockResult {
  static_assert(sizeof(R) == 0,
                "tp::cpp::checkpointed: the block must return at::Tensor, std::vector<at::Tensor> or "
                "std::tuple<at::Tensor, ...>");
};
template <>
struct BlockResult<at::Tensor> {
  static std::vector<at::Tensor> to_list(at::Tensor r) { return {std::move(r)}; }
  static at::Tensor from_list(std::vector<at::Tensor> l) { return std::move(l.at(0)); }
};
template <>
struct BlockResult<std::vector<at::Tensor>> {
  static std::vector<at::Tensor> to_list(std::vector<at::Tensor> r) { return r; }
  static std::vector<at::Tensor> from_list(std::vector<at::Tensor> l) { return l; }
};
template <typename... Ts>
struct BlockResult<std::tuple<Ts...>> {
  static_assert((std::is_same_v<Ts, at::Tensor> && ...), "tp::cpp::checkpointed: tuple members must be at::Tensor");
  static std::vector<at::Tensor> to_list(std::tuple<Ts...> r) {
    return std::apply([](auto&&... t) { return std::vector<at::Tensor>{std::move(t)...}; }, std::move(r));
  }
  static std::tuple<Ts...> from_list(std::vector<at::Tensor> l) {
    return from_list(std::move(l), std::index_sequence_for<Ts...>{});
  }
  template <std::size_t... I>
  static std::tuple<Ts...> from_list(std::vector<at::Tensor> l, std::index_sequence<I...>) {
    return std::tuple<Ts...>{std::move(l.at(I))...};
  }
};

template <typename Fn, std::size_t... I>
decltype(auto) call_with(Fn& fn, const std::vector<at::Tensor>& xs, std::index_sequence<I...>) {
  return fn(xs[I]...);
}

/// Runs the type-erased block through the autograd node.
inline std::vector<at::Tensor> run_checkpointed(const CheckpointBlock& block, BlockFunction fn,
                                                const std::vector<at::Tensor>& inputs) {
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = std::move(fn);
  state->parameters = block.parameters();
  state->buffers = block.buffers();
  state->rng = RngStates::capture(inputs);  // before the forward draws from it
  state->autocast = AutocastState::capture();
  const std::vector<at::Tensor> parameters = state->parameters;
  return CheckpointFunction::apply(std::move(state), at::TensorList(inputs), at::TensorList(parameters));
}

}  // namespace detail

/// Runs `fn(inputs...)` as a checkpointed block: the forward runs without autograd history and
/// only `inputs` are kept; backward re-runs `fn` with history (same RNG and autocast state as the
/// forward; the block's buffers restored afterwards) and back-propagates through it into the
/// inputs and into `block`'s parameters. Returns what `fn` returns: at::Tensor,
/// std::vector<at::Tensor> or std::tuple<at::Tensor, ...> (integer outputs get no gradient).
///
/// A plain call `fn(inputs...)` when grad mode is off, `block` is not training, or nothing
/// (no input, no parameter) requires grad: evaluation and inference pay nothing.
///
/// `fn` is copied and kept until backward: capture by value (`[this, i]`), never references to
/// locals. It must not modify its inputs in place (backward then fails with LibTorch's "modified
/// by an inplace operation"), and every tensor it reads that needs a gradient must be an input
/// or a parameter of `block`. Inputs must be defined. Double backward is not supported.
///
/// Example:
///   auto [a, b] = tp::cpp::checkpointed({*attn, *norm},
///       [this](const at::Tensor& x, const at::Tensor& mask) {
///         return std::make_tuple(attn->forward(norm->forward(x), mask), mask.sum());
///       }, x, mask);
template <typename Fn, typename... Inputs>
auto checkpointed(const CheckpointBlock& block, Fn&& fn, const Inputs&... inputs) {
  static_assert(sizeof...(Inputs) > 0, "tp::cpp::checkpointed: a block needs at least one input");
  static_assert((std::is_same_v<Inputs, at::Tensor> && ...),
                "tp::cpp::checkpointed: inputs must be at::Tensor; pass other values through fn's captures");
  using R = std::decay_t<std::invoke_result_t<Fn&, const Inputs&...>>;
  bool needs_grad = false;
  for (const at::Tensor* t : {&inputs...}) needs_grad = needs_grad || (t->defined() && t->requires_grad());
  needs_grad = needs_grad || !block.parameters().empty();
  if (!at::GradMode::is_enabled() || !block.training() || !needs_grad) return R(fn(inputs...));
  for (const at::Tensor* t : {&inputs...})
    TORCH_CHECK(t->defined(), "tp::cpp::checkpointed: inputs must be defined tensors");
  BlockFunction erased = [f = std::decay_t<Fn>(std::forward<Fn>(fn))](const std::vector<at::Tensor>& xs) mutable {
    return detail::BlockResult<R>::to_list(detail::call_with(f, xs, std::index_sequence_for<Inputs...>{}));
  };
  return detail::BlockResult<R>::from_list(detail::run_checkpointed(block, std::move(erased), {inputs...}));
}

/// Mixin for a model (or a sub-module) whose blocks can be checkpointed: it holds the switch the
/// host sets through tp_model_v1_t::set_activation_checkpointing, and checkpoint_block() honours
/// it. Override set_activation_checkpointing to pass the switch to sub-modules (call the base
/// too), or to refuse (throw Failure(TP_ERR_UNSUPPORTED, "why")).
class Checkpointable {
 public:
  virtual ~Checkpointable() = default;
  /// [main & !training step] Off after construction.
  virtual void set_activation_checkpointing(bool enabled) { activation_checkpointing_ = enabled; }
  bool activation_checkpointing() const noexcept { return activation_checkpointing_; }

 protected:
  /// checkpointed(block, fn, inputs...) when the switch is on; fn(inputs...) when it is off.
  template <typename Fn, typename... Inputs>
  auto checkpoint_block(const CheckpointBlock& block, Fn&& fn, const Inputs&... inputs) const {
    using R = std::decay_t<std::invoke_result_t<Fn&, const Inputs&...>>;
    if (!activation_checkpointing_) return R(fn(inputs...));
    return checkpointed(block, std::forward<Fn>(fn), inputs...);
  }

 private:
  bool activation_checkpointing_ = false;
};

/// The tp_model_v1_t::set_activation_checkpointing entry for instances whose Checkpointable is
/// `kAccess(self)` (a function `Checkpointable& (void*)`, or returning a class derived from it,
/// that throws Failure for a bad `self`). Exceptions become a status through TP_GUARD.
///
/// Example:
///   MyNet& as_net(void* self) { return *static_cast<Instance*>(self)->net; }
///   const tp_model_v1_t kTable = {sizeof(tp_model_v1_t), &create, &destroy, &to_device,
///       &set_training, &visit_state, &forward, &tp::cpp::set_activation_checkpointing_entry<&as_net>};
template <auto kAccess>
tp_status set_activation_checkpointing_entry(void* self, bool enabled) {
  TP_GUARD(plugin_host(), {
    if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "set_activation_checkpointing: self is NULL");
    Checkpointable& target = kAccess(self);
    target.set_activation_checkpointing(enabled);
    return TP_OK;
  });
}

}  // namespace tp::cpp

#endif  // TP_CPP_ACTIVATION_CHECKPOINT_H
