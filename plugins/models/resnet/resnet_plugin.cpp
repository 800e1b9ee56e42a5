// resnet: the tp_model_v1_t table of org.torchhost.resnet, its descriptor and tp_entry.
// The state plumbing (aliases of the module's tensors, to_device keeping num_batches_tracked
// int64) is tp/cpp/model_state.h, shared with the other model plugins.
#include <c10/util/StringUtil.h>

#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "resnet_net.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_state.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/model.h"

namespace tp::resnet {
namespace {

using tp::cpp::Failure;
using tp::cpp::plugin_host;

constexpr const char* kId = "org.torchhost.resnet";

struct Instance {
  std::shared_ptr<ResNet> net;
  std::string input;
  int64_t in_channels;
  at::ScalarType dtype = at::kFloat;
  std::vector<tp::cpp::StateEntry> state;  ///< lent by visit_state; rebuilt by create and to_device
};

Instance& as_instance(void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "resnet: model instance is NULL");
  return *static_cast<Instance*>(self);
}

ResNet& as_net(void* self) { return *as_instance(self).net; }

void require(bool ok, const char* key, const char* what, const std::string& got) {
  if (!ok) throw Failure(TP_ERR_CONFIG, std::string(kId) + ": " + key + " " + what + ", got " + got);
}

tp_status create(const tp_host_t* host, const tp_config_t* raw, void** out_self) {
  (void)host;
  TP_GUARD(plugin_host(), {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "create: out_self is NULL");
    *out_self = nullptr;
    const tp::cpp::ConfigReader cfg(raw);
    ResNetOptions o;
    o.depth = cfg.get_int("depth");
    o.num_classes = cfg.get_int("num_classes");
    o.in_channels = cfg.get_int("in_channels");
    o.zero_init_residual = cfg.get_bool("zero_init_residual");
    require(o.depth == 18 || o.depth == 34 || o.depth == 50, "depth",
            "must be 18, 34 or 50 (torchvision's resnet18/34/50)", std::to_string(o.depth));
    require(o.num_classes > 0, "num_classes", "must be positive", std::to_string(o.num_classes));
    require(o.in_channels > 0, "in_channels", "must be positive", std::to_string(o.in_channels));
    auto instance = std::make_unique<Instance>();
    instance->net = std::make_shared<ResNet>(o);
    instance->input = cfg.get_string("input");
    instance->in_channels = o.in_channels;
    instance->state = tp::cpp::collect_state(*instance->net);
    *out_self = instance.release();
    return TP_OK;
  });
}

void destroy(void* self) { delete static_cast<Instance*>(self); }

tp_status to_device(void* self, int32_t device_type, int32_t device_index, int32_t dtype) {
  TP_GUARD(plugin_host(), {
    Instance& m = as_instance(self);
    const at::ScalarType target = tp::cpp::float_dtype(dtype);
    tp::cpp::move_state(m.state, tp::cpp::device_of(device_type, device_index), target);
    m.dtype = target;
    m.state = tp::cpp::collect_state(*m.net);
    return TP_OK;
  });
}

tp_status set_training(void* self, bool training) {
  TP_GUARD(plugin_host(), {
    as_instance(self).net->train(training);
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
    if (out_outputs == nullptr || capacity < 1)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "forward: the model has 1 output (logits) but capacity is 0");
    Instance& m = as_instance(self);
    const at::Tensor& x = tp::cpp::find(inputs, input_count, m.input, "input");
    if (x.dim() != 4 || x.size(1) != m.in_channels || !x.is_floating_point())
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    std::string(kId) + ": input '" + m.input + "': expected a floating [B, " +
                        std::to_string(m.in_channels) + ", H, W] image (in_channels = " + std::to_string(m.in_channels) +
                        "), got " + std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
    at::Tensor logits = m.net->forward(x.scalar_type() == m.dtype ? x : x.to(m.dtype));
    out_outputs[0] = {"logits", tp::cpp::new_handle(std::move(logits))};
    *out_count = 1;
    return TP_OK;
  });
}

const tp_model_v1_t kTable = {sizeof(tp_model_v1_t), &create, &destroy, &to_device, &set_training, &visit_state,
                              &forward, &tp::cpp::set_activation_checkpointing_entry<&as_net>};

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "depth", TP_CFG_INT, "18", "18, 34 (BasicBlock) or 50 (Bottleneck v1.5)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "1000", "number of logits (fc outputs)"},
    {sizeof(tp_config_key_t), "in_channels", TP_CFG_INT, "3", "image channels (conv1 input)"},
    {sizeof(tp_config_key_t), "zero_init_residual", TP_CFG_BOOL, "false",
     "zero the last BatchNorm weight of every residual block (each block starts as the identity)"},
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"image\"", "batch field holding the [C, H, W] image"},
};

// Static, so they describe the defaults (in_channels 3, num_classes 1000); `host plugins check`
// and profiling use them with the default config.
const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 224, 224}, 0},
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 1000},
};

const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t), kId, TP_KIND_MODEL, TP_TIER_T, "1.0.0",
    "torchvision ResNet-18/34/50 (same state names, loads torchvision weights); outputs logits; "
    "stem and every residual block checkpointable",
    kKeys, static_cast<uint32_t>(std::size(kKeys)),
    kExamples, static_cast<uint32_t>(std::size(kExamples)), 0};

const tp::cpp::Component kComponents[] = {{&kDescriptor, TP_IFACE_MODEL_V1, &kTable}};

}  // namespace
}  // namespace tp::resnet

TP_DEFINE_PLUGIN("resnet", TP_TORCH_BUILD_INFO_INIT, tp::resnet::kComponents)
