// torchhost C++ helpers for Tier T plugin authors: a model as a C++ class, and the C shell
// ("tp.model/1": create/destroy/to_device/set_training/visit_state/forward/set_batchnorm_frozen/
// set_batchnorm_frozen_at and, when the class has them, set_activation_checkpointing,
// layer_depths, check_graph_capture and after_optimizer_step) generated from it.
//
// The adapter keeps the state the host borrows (tp/cpp/model_state.h: collected after create and
// after every to_device, integer buffers kept integer), wraps every call in TP_GUARD (PLG-7),
// hands outputs over only when forward succeeds (PLG-9: on error no output is handed over) and
// accepts destroy(NULL) (PLG-12).
//
//   class Linear : public torch::nn::Module {
//    public:
//     explicit Linear(const tp::cpp::ConfigReader& cfg)                 // [main] CPU, fp32
//         : input_(cfg.get_string("input")),
//           fc_(register_module("fc", torch::nn::Linear(cfg.get_int_in("in_features", 1, 1 << 20), 1))) {}
//     tp::cpp::Outputs forward(const tp::cpp::Inputs& in) {                // [main] no device sync
//       return {{"y", fc_->forward(in.get(input_))}};
//     }
//    private:
//     std::string input_;
//     torch::nn::Linear fc_;
//   };
//   const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor("org.example.linear", "1.0.0", "y = Wx + b", kKeys);
//   TP_DEFINE_MODEL_PLUGIN("linear", Linear, kDescriptor)
//
// What the class provides (M below):
//   M(const ConfigReader&)                  or a factory: model_component<M, kDescriptor, &make>()
//                                           with `std::shared_ptr<M> make(const ConfigReader&)`
//   Outputs forward(const Inputs&)          output names valid until destroy (static storage or
//                                           the model's own strings)
//   void train(bool)                        torch::nn::Module has it
//   state_root()                            optional: the module whose parameters and buffers the
//                                           host trains (a torch::nn::Module or torch::jit::Module);
//                                           without it, the model itself (a torch::nn::Module)
//   void set_dtype(at::ScalarType)          optional: told the floating dtype after to_device
//   void to_device(c10::Device device, at::ScalarType dtype)
//                                           optional: called by to_device after the adapter moved
//                                           the lent state (and after set_dtype), before it is
//                                           collected again: move what the host cannot see (an
//                                           unregistered teacher, a torch::jit::Module)
//   void after_optimizer_step(int64_t step, int64_t total_steps)
//                                           optional (ABI 1.14): once per optimizer step, no grad
//                                           mode (a momentum teacher); without it the entry is NULL
//   void set_activation_checkpointing(bool) optional (tp::cpp::Checkpointable): without it the
//                                           table's entry is NULL and the host refuses the switch
//   std::vector<LayerDepth> layer_depths()  optional (ABI 1.4): the depth ordering of the
//                                           parameters for optim.layer_decay; without it the
//                                           entry is NULL and the host refuses layer_decay
//   std::string graph_capture_blocker() const
//                                           optional (ABI 1.8): "" when this instance's training
//                                           step can be captured in a CUDA graph, else the reason
//                                           in one sentence ("reads the number of boxes on the
//                                           host"); without it the entry is NULL, which means
//                                           capturable (PLG-18): declare it when the forward
//                                           syncs, branches on values or uses its own streams
//
// set_batchnorm_frozen (ABI 1.4, `[model] freeze_bn_stats`) and set_batchnorm_frozen_at (ABI 1.14,
// a param-group rule's `freeze_bn_stats`) need nothing from the class: the adapter finds the
// BatchNorm layers of the state root (torch::nn::BatchNorm1d/2d/3d, or the scripted
// torch.nn.BatchNorm1d/2d/3d of a TorchScript module; all of them, or those with the names given)
// and keeps them in eval mode after every set_training(true).
#ifndef TP_CPP_MODEL_ADAPTER_H
#define TP_CPP_MODEL_ADAPTER_H

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_state.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/model.h"

namespace tp::cpp {

/// The batch fields forward receives: every field of the batch, on the model's device, batch
/// dimension first. Borrowed for the call.
class Inputs {
 public:
  Inputs(const tp_named_tensor_t* fields, uint32_t count) noexcept : fields_(fields), count_(count) {}
  /// The field `name`; throws Failure(TP_ERR_INVALID_ARGUMENT) listing the fields present.
  const at::Tensor& get(std::string_view name) const { return find(fields_, count_, name, "input"); }
  const tp_named_tensor_t* data() const noexcept { return fields_; }
  uint32_t size() const noexcept { return count_; }

 private:
  const tp_named_tensor_t* fields_;
  uint32_t count_;
};

/// One entry of a model's depth ordering (tp_layer_depth_t, ABI 1.4): the parameters under the
/// dotted `prefix` sit at `depth` (0 = nearest the input). Parameters no prefix claims are the
/// head, one past the deepest depth. Example, ResNet: {"conv1", 0}, {"bn1", 0}, {"layer1.0", 1}, ...
struct LayerDepth {
  std::string prefix;
  uint32_t depth;
};

/// One output of forward. `name` must stay valid until destroy (static storage or a string the
/// model owns): it crosses the ABI unchanged.
struct Output {
  const char* name;
  at::Tensor tensor;
};
using Outputs = std::vector<Output>;

namespace detail {

template <typename M, typename = void>
struct HasStateRoot : std::false_type {};
template <typename M>
struct HasStateRoot<M, std::void_t<decltype(std::declval<M&>().state_root())>> : std::true_type {};
template <typename M, typename = void>
struct HasSetDtype : std::false_type {};
template <typename M>
struct HasSetDtype<M, std::void_t<decltype(std::declval<M&>().set_dtype(at::kFloat))>> : std::true_type {};
template <typename M, typename = void>
struct HasToDevice : std::false_type {};
template <typename M>
struct HasToDevice<M, std::void_t<decltype(std::declval<M&>().to_device(std::declval<c10::Device>(), at::kFloat))>>
    : std::true_type {};
template <typename M, typename = void>
struct HasAfterOptimizerStep : std::false_type {};
template <typename M>
struct HasAfterOptimizerStep<
    M, std::void_t<decltype(std::declval<M&>().after_optimizer_step(std::declval<int64_t>(), std::declval<int64_t>()))>>
    : std::true_type {};
template <typename M, typename = void>
struct HasCheckpointing : std::false_type {};
template <typename M>
struct HasCheckpointing<M, std::void_t<decltype(std::declval<M&>().set_activation_checkpointing(true))>>
    : std::true_type {};

template <typename M, typename = void>
struct HasLayerDepths : std::false_type {};
template <typename M>
struct HasLayerDepths<M, std::void_t<decltype(std::vector<LayerDepth>(std::declval<M&>().layer_depths()))>>
    : std::true_type {};

// Detected on M&, not const M&: a class that declared the blocker without `const` still has its
// reason reported; ignoring it would silently call an uncapturable model capturable.
template <typename M, typename = void>
struct HasGraphCaptureBlocker : std::false_type {};
template <typename M>
struct HasGraphCaptureBlocker<M, std::void_t<decltype(std::string(std::declval<M&>().graph_capture_blocker()))>>
    : std::true_type {};

/// Whether a module class or scripted type name is a batch-normalisation layer: LibTorch's
/// "torch::nn::BatchNorm2dImpl", a scripted module's "BatchNorm2d".
inline bool is_batchnorm_name(const std::string& name) {
  for (const char* suffix : {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "BatchNorm1dImpl", "BatchNorm2dImpl",
                             "BatchNorm3dImpl"}) {
    const std::string tail(suffix);
    if (name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0 &&
        (name.size() == tail.size() || name[name.size() - tail.size() - 1] == ':' ||
         name[name.size() - tail.size() - 1] == '.'))
      return true;
  }
  return false;
}

/// Puts every batch-normalisation layer under `root` (a torch::nn::Module or torch::jit::Module)
/// in eval mode; returns how many there are. Generic, so a library without TorchScript never
/// instantiates the jit branch.
template <typename Root>
std::size_t set_batchnorm_eval(Root& root) {
  std::size_t found = 0;
  if constexpr (std::is_base_of_v<torch::nn::Module, Root>) {
    for (const auto& module : root.modules(/*include_self=*/true))
      if (is_batchnorm_name(module->name())) {
        module->eval();
        ++found;
      }
  } else {
    for (auto module : root.modules()) {
      const auto type_name = module.type()->name();
      if (type_name && is_batchnorm_name(type_name->name())) {
        module.eval();
        ++found;
      }
    }
  }
  return found;
}

/// Puts the layers of `root` named in `names` (dotted module names, as its state names start) that
/// keep running statistics in eval mode: BatchNorm1d/2d/3d, and any layer with a `running_mean`
/// buffer (InstanceNorm with track_running_stats, a scripted FrozenBatchNorm2d), which is how the
/// host found them. Returns the names that are no such layer of `root`.
template <typename Root>
std::vector<std::string> set_named_batchnorm_eval(Root& root, const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    bool found = false;
    if constexpr (std::is_base_of_v<torch::nn::Module, Root>) {
      for (const auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/false))
        if (item.key() == name && (is_batchnorm_name(item.value()->name()) ||
                                   item.value()->named_buffers(/*recurse=*/false).contains("running_mean"))) {
          item.value()->eval();
          found = true;
        }
    } else {
      for (auto item : root.named_modules())
        if (item.name == name && ((item.value.type()->name() && is_batchnorm_name(item.value.type()->name()->name())) ||
                                  item.value.hasattr("running_mean"))) {
          item.value.eval();
          found = true;
        }
    }
    if (!found) missing.push_back(name);
  }
  return missing;
}

/// One instance: the model and the state entries lent by visit_state (rebuilt by create and
/// to_device, unchanged in between, so lent handles stay valid).
template <typename M>
struct ModelInstance {
  const tp_host_t* host;
  std::shared_ptr<M> model;
  std::vector<StateEntry> state;
  bool training = true;          ///< the last set_training
  bool batchnorm_frozen = false; ///< set_batchnorm_frozen: BatchNorm layers stay in eval mode
  std::vector<std::string> frozen_batchnorms; ///< set_batchnorm_frozen_at: these stay in eval mode
  std::vector<LayerDepth> depths;           ///< layer_depths' strings, alive until destroy
  std::vector<tp_layer_depth_t> depth_view; ///< what layer_depths hands out

  auto& root() {
    if constexpr (HasStateRoot<M>::value) return model->state_root();
    else return *model;
  }
  void collect() { state = collect_state(root()); }
};

template <typename M, const tp_descriptor_t& kDescriptor, auto kFactory>
struct ModelAdapter {
  using Instance = ModelInstance<M>;

  static const tp_host_t* host_of(const void* self) noexcept {
    return self != nullptr ? static_cast<const Instance*>(self)->host : plugin_host();
  }
  static Instance& instance(void* self) {
    if (self == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component_name(kDescriptor)) + ": model instance is NULL");
    return *static_cast<Instance*>(self);
  }

  static tp_status create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
    TP_GUARD(host != nullptr ? host : plugin_host(), {
      const char* name = component_name(kDescriptor);
      if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": out_self is NULL");
      *out_self = nullptr;
      const ConfigReader config(cfg, name);
      auto instance = std::make_unique<Instance>();
      instance->host = host;
      if constexpr (std::is_same_v<decltype(kFactory), std::nullptr_t>) instance->model = std::make_shared<M>(config);
      else instance->model = kFactory(config);
      if (instance->model == nullptr) throw Failure(TP_ERR_INTERNAL, std::string(name) + ": the factory returned no model");
      instance->collect();
      *out_self = instance.release();
      return TP_OK;
    });
  }

  static void destroy(void* self) { delete static_cast<Instance*>(self); }

  static tp_status to_device(void* self, int32_t device_type, int32_t device_index, int32_t dtype) {
    TP_GUARD(host_of(self), {
      Instance& m = instance(self);
      const at::ScalarType target = float_dtype(dtype);
      const c10::Device device = device_of(device_type, device_index);
      move_state(m.state, device, target);
      if constexpr (HasSetDtype<M>::value) m.model->set_dtype(target);
      // After the lent state moved, so the class sees its registered tensors where they now are;
      // before collect(), so whatever it registers or moves is what the host visits next.
      if constexpr (HasToDevice<M>::value) m.model->to_device(device, target);
      m.collect();
      return TP_OK;
    });
  }

  static tp_status set_training(void* self, bool training) {
    TP_GUARD(host_of(self), {
      Instance& m = instance(self);
      m.model->train(training);
      m.training = training;
      if (training && m.batchnorm_frozen) set_batchnorm_eval(m.root());
      if (training && !m.frozen_batchnorms.empty()) set_named_batchnorm_eval(m.root(), m.frozen_batchnorms);
      return TP_OK;
    });
  }

  static tp_status visit_state(void* self, tp_state_visitor visit, void* user) {
    TP_GUARD(host_of(self), { return visit_state_entries(instance(self).state, visit, user); });
  }

  static tp_status forward(void* self, const tp_named_tensor_t* inputs, uint32_t input_count,
                           tp_named_tensor_t* out_outputs, uint32_t capacity, uint32_t* out_count) {
    TP_GUARD(host_of(self), {
      const char* name = component_name(kDescriptor);
      if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": forward: out_count is NULL");
      *out_count = 0;
      if (inputs == nullptr && input_count > 0)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": forward: inputs is NULL");
      Outputs outputs = instance(self).model->forward(Inputs(inputs, input_count));
      // Dropping outputs silently would surface later as a confusing "no output named ..." in
      // the loss, so a too-small array is an error.
      if (outputs.size() > capacity || (out_outputs == nullptr && !outputs.empty()))
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": forward: the model has " +
                                                   std::to_string(outputs.size()) + " outputs but capacity is " +
                                                   std::to_string(capacity));
      // Every handle is made before any is handed over: if one allocation fails, the ones made
      // are freed here and the host receives none.
      std::vector<std::unique_ptr<at::Tensor>> handles;
      handles.reserve(outputs.size());
      for (Output& output : outputs) {
        if (output.name == nullptr)
          throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": forward: an output has no name");
        handles.push_back(std::make_unique<at::Tensor>(std::move(output.tensor)));
      }
      for (std::size_t i = 0; i < outputs.size(); ++i)
        out_outputs[i] = {outputs[i].name, reinterpret_cast<tp_tensor>(handles[i].release())};
      *out_count = static_cast<uint32_t>(outputs.size());
      return TP_OK;
    });
  }

  static tp_status set_activation_checkpointing(void* self, bool enabled) {
    TP_GUARD(host_of(self), {
      instance(self).model->set_activation_checkpointing(enabled);
      return TP_OK;
    });
  }

  static tp_status layer_depths(void* self, const tp_layer_depth_t** out_entries, uint32_t* out_count) {
    TP_GUARD(host_of(self), {
      const char* name = component_name(kDescriptor);
      if (out_entries == nullptr || out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": layer_depths: an output pointer is NULL");
      Instance& m = instance(self);
      m.depths = m.model->layer_depths();
      if (m.depths.empty())
        throw Failure(TP_ERR_UNSUPPORTED, std::string(name) + ": this configuration declares no layer depths");
      m.depth_view.clear();
      for (const LayerDepth& entry : m.depths) m.depth_view.push_back({entry.prefix.c_str(), entry.depth});
      *out_entries = m.depth_view.data();
      *out_count = static_cast<uint32_t>(m.depth_view.size());
      return TP_OK;
    });
  }

  static tp_status set_batchnorm_frozen(void* self, bool frozen) {
    TP_GUARD(host_of(self), {
      Instance& m = instance(self);
      if (frozen && set_batchnorm_eval(m.root()) == 0)
        throw Failure(TP_ERR_UNSUPPORTED, std::string(component_name(kDescriptor)) +
                                              ": the model has no BatchNorm layer (torch::nn::BatchNorm1d/2d/3d or "
                                              "a scripted torch.nn.BatchNorm1d/2d/3d), so there are no statistics "
                                              "to freeze");
      m.batchnorm_frozen = frozen;
      if (!frozen) m.model->train(m.training); // the BatchNorm layers follow the model again
      return TP_OK;
    });
  }

  static tp_status set_batchnorm_frozen_at(void* self, const char* const* names, uint32_t count) {
    TP_GUARD(host_of(self), {
      Instance& m = instance(self);
      if (names == nullptr && count > 0)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component_name(kDescriptor)) + ": names is NULL");
      std::vector<std::string> wanted;
      for (uint32_t i = 0; i < count; ++i) wanted.emplace_back(names[i] != nullptr ? names[i] : "");
      // Every layer back to the model's mode, then the frozen ones again: the model-wide switch,
      // and the new set (or, when a name is refused, the set as it was).
      const auto reapply = [&m](const std::vector<std::string>& set) {
        m.model->train(m.training);
        if (m.training && m.batchnorm_frozen) set_batchnorm_eval(m.root());
        return m.training ? set_named_batchnorm_eval(m.root(), set) : std::vector<std::string>{};
      };
      const std::vector<std::string> missing = set_named_batchnorm_eval(m.root(), wanted);
      if (!missing.empty()) {
        reapply(m.frozen_batchnorms);
        throw Failure(TP_ERR_UNSUPPORTED, std::string(component_name(kDescriptor)) + ": '" + missing.front() +
                                              "' is not a BatchNorm layer of the model (torch::nn::BatchNorm1d/2d/3d, "
                                              "a scripted torch.nn.BatchNorm1d/2d/3d, or a layer with a running_mean "
                                              "buffer)");
      }
      m.frozen_batchnorms = std::move(wanted);
      reapply(m.frozen_batchnorms);
      return TP_OK;
    });
  }

  static tp_status check_graph_capture(void* self) {
    TP_GUARD(host_of(self), {
      const std::string reason = instance(self).model->graph_capture_blocker();
      if (!reason.empty()) throw Failure(TP_ERR_UNSUPPORTED, reason);
      return TP_OK;
    });
  }

  static tp_status after_optimizer_step(void* self, int64_t step, int64_t total_steps) {
    TP_GUARD(host_of(self), {
      instance(self).model->after_optimizer_step(step, total_steps);
      return TP_OK;
    });
  }

  static constexpr tp_model_v1_t table() {
    tp_model_v1_t t{sizeof(tp_model_v1_t), &create, &destroy, &to_device, &set_training, &visit_state, &forward,
                    nullptr, nullptr, &set_batchnorm_frozen};
    t.set_batchnorm_frozen_at = &set_batchnorm_frozen_at;
    if constexpr (HasCheckpointing<M>::value) t.set_activation_checkpointing = &set_activation_checkpointing;
    if constexpr (HasLayerDepths<M>::value) t.layer_depths = &layer_depths;
    if constexpr (HasGraphCaptureBlocker<M>::value) t.check_graph_capture = &check_graph_capture;
    if constexpr (HasAfterOptimizerStep<M>::value) t.after_optimizer_step = &after_optimizer_step;
    return t;
  }
};

template <typename M, const tp_descriptor_t& kDescriptor, auto kFactory>
inline constexpr tp_model_v1_t kModelTable = ModelAdapter<M, kDescriptor, kFactory>::table();

}  // namespace detail

/// The descriptor of a model component: kind model, Tier T, the schema `keys` (PLG-6) and the
/// example inputs `host plugins check` and profiling feed it with the default config. Static strings.
template <std::size_t N, std::size_t E>
constexpr tp_descriptor_t model_descriptor(const char* id, const char* version, const char* description,
                                           const tp_config_key_t (&keys)[N], const tp_example_input_t (&examples)[E]) {
  return {sizeof(tp_descriptor_t), id, TP_KIND_MODEL, TP_TIER_T, version, description, keys,
          static_cast<uint32_t>(N), examples, static_cast<uint32_t>(E), 0};
}
/// The same without example inputs (their shapes depend on the config).
template <std::size_t N>
constexpr tp_descriptor_t model_descriptor(const char* id, const char* version, const char* description,
                                           const tp_config_key_t (&keys)[N]) {
  return {sizeof(tp_descriptor_t), id, TP_KIND_MODEL, TP_TIER_T, version, description, keys,
          static_cast<uint32_t>(N), nullptr, 0, 0};
}

/// The component entry (descriptor, "tp.model/1", generated table) of model class `M`, built by
/// `M(const ConfigReader&)` or, when given, by `kFactory` (`std::shared_ptr<M> (*)(const
/// ConfigReader&)`, M may then be an abstract base). `kDescriptor` has static storage.
template <typename M, const tp_descriptor_t& kDescriptor, auto kFactory = nullptr>
constexpr Component model_component() {
  return {&kDescriptor, TP_IFACE_MODEL_V1, &detail::kModelTable<M, kDescriptor, kFactory>};
}

}  // namespace tp::cpp

/// Defines `tp_entry` of a Tier T library NAME (its .so base name) whose one component is the
/// model class CLASS described by DESCRIPTOR (a namespace-scope tp_descriptor_t).
#define TP_DEFINE_MODEL_PLUGIN(NAME, CLASS, DESCRIPTOR)                                          \
  namespace {                                                                                    \
  const ::tp::cpp::Component tp_detail_model_components[] = {                                    \
      ::tp::cpp::model_component<CLASS, DESCRIPTOR>()};                                          \
  }                                                                                              \
  TP_DEFINE_PLUGIN(NAME, TP_TORCH_BUILD_INFO_INIT, tp_detail_model_components)

#endif  // TP_CPP_MODEL_ADAPTER_H
