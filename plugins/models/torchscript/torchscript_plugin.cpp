// torchscript: the tp_model_v1_t table of org.torchhost.torchscript, its descriptor and tp_entry.
// The glue follows plugins/models/vision/vision_plugin.cpp; activation checkpointing is not
// offered (the entry is NULL, so the host refuses `activation_checkpointing = true` with a
// configuration error): a scripted module's blocks are not visible from here.
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scripted_model.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/model.h"

namespace tp::torchscript {
namespace {

using tp::cpp::Failure;
using tp::cpp::plugin_host;

constexpr const char* kId = "org.torchhost.torchscript";

/// One parameter or buffer as visit_state hands it out; the borrowed handle points at `tensor`.
struct StateEntry {
  std::string name;
  at::Tensor tensor;
  bool is_buffer;
};

struct Instance {
  std::unique_ptr<ScriptedModel> model;
  std::vector<StateEntry> state;

  void collect_state() {
    state.clear();
    for (const auto& p : model->module().named_parameters(/*recurse=*/true)) state.push_back({p.name, p.value, false});
    for (const auto& b : model->module().named_buffers(/*recurse=*/true))
      if (b.value.defined()) state.push_back({b.name, b.value, true});
  }
};

Instance& as_instance(void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "torchscript: model instance is NULL");
  return *static_cast<Instance*>(self);
}

tp_status create(const tp_host_t* host, const tp_config_t* raw, void** out_self) {
  (void)host;
  TP_GUARD(plugin_host(), {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "create: out_self is NULL");
    *out_self = nullptr;
    const tp::cpp::ConfigReader cfg(raw);
    ScriptedModelOptions o;
    o.path_as_given = cfg.get_string("path");
    if (o.path_as_given.empty())
      throw Failure(TP_ERR_CONFIG, std::string(kId) + ": path is empty. Set [model] path to the file written by "
                                                      "torch.jit.script(model).save(\"m.pt\").");
    // The plugin sees only the key's value, not the config file it came from, so a relative
    // path is opened from the working directory, like train.init_weights.
    o.path = o.path_as_given;
    o.inputs = cfg.get_string_array("inputs");
    o.outputs = cfg.get_string_array("outputs");
    auto instance = std::make_unique<Instance>();
    instance->model = std::make_unique<ScriptedModel>(std::move(o));
    instance->model->train(true);
    instance->collect_state();
    *out_self = instance.release();
    return TP_OK;
  });
}

void destroy(void* self) { delete static_cast<Instance*>(self); }

at::ScalarType float_dtype(int32_t dtype) {
  switch (dtype) {
    case TP_DTYPE_FLOAT32: return at::kFloat;
    case TP_DTYPE_FLOAT64: return at::kDouble;
    case TP_DTYPE_FLOAT16: return at::kHalf;
    case TP_DTYPE_BFLOAT16: return at::kBFloat16;
    default:
      throw Failure(TP_ERR_INVALID_ARGUMENT, "to_device: dtype must be a floating TP_DTYPE_*, got " + std::to_string(dtype));
  }
}

tp_status to_device(void* self, int32_t device_type, int32_t device_index, int32_t dtype) {
  TP_GUARD(plugin_host(), {
    Instance& m = as_instance(self);
    at::Device device(at::kCPU);
    if (device_type == TP_DEVICE_CUDA) device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    else if (device_type != TP_DEVICE_CPU)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "to_device: unknown device type " + std::to_string(device_type));
    m.model->to(device, float_dtype(dtype));
    m.collect_state();
    return TP_OK;
  });
}

tp_status set_training(void* self, bool training) {
  TP_GUARD(plugin_host(), {
    as_instance(self).model->train(training);
    return TP_OK;
  });
}

tp_status visit_state(void* self, tp_state_visitor visit, void* user) {
  TP_GUARD(plugin_host(), {
    if (visit == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "visit_state: visitor is NULL");
    for (const StateEntry& e : as_instance(self).state) {
      const tp_status status = visit(user, e.name.c_str(), tp::cpp::borrow_handle(e.tensor), e.is_buffer);
      if (status != TP_OK) return status;  // the visitor recorded its own message
    }
    return TP_OK;
  });
}

tp_status forward(void* self, const tp_named_tensor_t* inputs, uint32_t input_count, tp_named_tensor_t* out_outputs,
                  uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(plugin_host(), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "forward: out_count is NULL");
    *out_count = 0;
    if (inputs == nullptr && input_count > 0) throw Failure(TP_ERR_INVALID_ARGUMENT, "forward: inputs is NULL");
    std::vector<NamedOutput> outputs = as_instance(self).model->forward(inputs, input_count);
    if (outputs.size() > capacity || (out_outputs == nullptr && !outputs.empty()))
      throw Failure(TP_ERR_INVALID_ARGUMENT, "forward: the module returned " + std::to_string(outputs.size()) +
                                                 " outputs but capacity is " + std::to_string(capacity));
    for (size_t i = 0; i < outputs.size(); ++i)
      out_outputs[i] = {outputs[i].name, tp::cpp::new_handle(std::move(outputs[i].tensor))};
    *out_count = static_cast<uint32_t>(outputs.size());
    return TP_OK;
  });
}

const tp_model_v1_t kTable = {sizeof(tp_model_v1_t), &create, &destroy, &to_device, &set_training, &visit_state,
                              &forward, nullptr};

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "path", TP_CFG_STRING, nullptr,
     "TorchScript file from torch.jit.script(model).save(path); relative to the working directory"},
    {sizeof(tp_config_key_t), "inputs", TP_CFG_STRING_ARRAY, "[\"image\"]",
     "batch fields passed positionally to forward, in order"},
    {sizeof(tp_config_key_t), "outputs", TP_CFG_STRING_ARRAY, "[\"logits\"]",
     "names of a Tensor output or of a tuple's/list's elements; Dict[str, Tensor] outputs keep their keys"},
};

// No example inputs: their shapes depend on the scripted module.
const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t), kId, TP_KIND_MODEL, TP_TIER_T, "1.0.0",
    "a TorchScript module (torch.jit.script(model).save) trained in place; its parameter and buffer names",
    kKeys, static_cast<uint32_t>(std::size(kKeys)), nullptr, 0, 0};

const tp::cpp::Component kComponents[] = {{&kDescriptor, TP_IFACE_MODEL_V1, &kTable}};

}  // namespace
}  // namespace tp::torchscript

TP_DEFINE_PLUGIN("torchscript", TP_TORCH_BUILD_INFO_INIT, tp::torchscript::kComponents)
