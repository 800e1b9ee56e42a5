// torchscript: the factory of org.torchhost.torchscript, its descriptor and tp_entry. The C shell
// is tp/cpp/model_adapter.h, shared with the other model plugins. Activation checkpointing is not
// offered (ScriptedModel has no set_activation_checkpointing, so the entry is NULL and the host
// refuses `activation_checkpointing = true` with a configuration error): a scripted module's
// blocks are not visible from here.
//
// CUDA graphs (ABI 1.8): ScriptedModel declares no graph_capture_blocker(), so check_graph_capture
// stays NULL and the host takes the model as capturable. TorchScript cannot tell: a scripted
// forward may branch on tensor values (`if x.sum() > 0`), call `.item()` or produce
// data-dependent shapes (`nonzero`), and none of that shows in the module's schema. A user whose
// scripted model does must set `run.cuda_graphs = "off"`; refusing every scripted model instead
// would deny capture to the many that are plain layer stacks.
#include <memory>
#include <string>
#include <utility>

#include "scripted_model.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_adapter.h"
#include "tp/cpp/plugin.h"
#include "tp/iface/model.h"

namespace tp::torchscript {
namespace {

using tp::cpp::Failure;


/// The component: a ScriptedModel from the validated config, in training mode.
std::shared_ptr<ScriptedModel> make_scripted_model(const tp::cpp::ConfigReader& cfg) {
  ScriptedModelOptions o;
  o.path_as_given = cfg.get_string("path");
  if (o.path_as_given.empty())
    throw Failure(TP_ERR_CONFIG, std::string(kId) + ": path is empty. Set [model] path to the file written by "
                                                    "torch.jit.script(model).save(\"m.pt\").");
  // `path` is a TP_CFG_PATH key: the host has already made it absolute (a value written in a
  // config file beside that file, a --set value from the working directory).
  o.path = o.path_as_given;
  o.inputs = cfg.get_string_array("inputs");
  o.outputs = cfg.get_string_array("outputs");
  auto model = std::make_shared<ScriptedModel>(std::move(o));
  model->train(true);
  return model;
}

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "path", TP_CFG_PATH, nullptr,
     "TorchScript file from torch.jit.script(model).save(path); a relative path is taken from the config file's directory"},
    {sizeof(tp_config_key_t), "inputs", TP_CFG_STRING_ARRAY, "[\"image\"]",
     "batch fields passed positionally to forward, in order"},
    {sizeof(tp_config_key_t), "outputs", TP_CFG_STRING_ARRAY, "[\"logits\"]",
     "names of a Tensor output or of a tuple's/list's elements; Dict[str, Tensor] outputs keep their keys"},
};

// No example inputs: their shapes depend on the scripted module.
const tp_descriptor_t kDescriptor = tp::cpp::model_descriptor(
    kId, "1.0.0", "a TorchScript module (torch.jit.script(model).save) trained in place; its parameter and buffer names",
    kKeys);

const tp::cpp::Component kComponents[] = {
    tp::cpp::model_component<ScriptedModel, kDescriptor, &make_scripted_model>()};

}  // namespace
}  // namespace tp::torchscript

TP_DEFINE_PLUGIN("torchscript", TP_TORCH_BUILD_INFO_INIT, tp::torchscript::kComponents)
