// torchscript: the tp_model_v1_t table of org.torchhost.torchscript, its descriptor and tp_entry.
// The state plumbing is tp/cpp/model_state.h, shared with the other model plugins; activation
// checkpointing is not
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
#include "tp/cpp/model_state.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/model.h"

namespace tp::torchscript {
namespace {

using tp::cpp::Failure;
using tp::cpp::plugin_host;

constexpr const char* kId = "org.torchhost.torchscript";

struct Instance {
  std::unique_ptr<ScriptedModel> model;
  std::vector<tp::cpp::StateEntry> state;  ///< lent by visit_state; rebuilt by create and to_device
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
    // `path` is a TP_CFG_PATH key: the host has already made a value written in a config file
    // absolute (beside that file); a relative one left here came from --set and is opened from
    // the working directory, as the shell user meant.
    o.path = o.path_as_given;
    o.inputs = cfg.get_string_array("inputs");
    o.outputs = cfg.get_string_array("outputs");
    auto instance = std::make_unique<Instance>();
    instance->model = std::make_unique<ScriptedModel>(std::move(o));
    instance->model->train(true);
    instance->state = tp::cpp::collect_state(instance->model->module());
    *out_self = instance.release();
    return TP_OK;
  });
}

void destroy(void* self) { delete static_cast<Instance*>(self); }

tp_status to_device(void* self, int32_t device_type, int32_t device_index, int32_t dtype) {
  TP_GUARD(plugin_host(), {
    Instance& m = as_instance(self);
    m.model->to(tp::cpp::device_of(device_type, device_index), tp::cpp::float_dtype(dtype));
    m.state = tp::cpp::collect_state(m.model->module());
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
    return tp::cpp::visit_state_entries(as_instance(self).state, visit, user);
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
    {sizeof(tp_config_key_t), "path", TP_CFG_PATH, nullptr,
     "TorchScript file from torch.jit.script(model).save(path); a relative path is taken from the config file's directory"},
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
