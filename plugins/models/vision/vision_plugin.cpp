// vision_models: the tp_model_v1_t glue every model shares, the shared CNN trunk, and tp_entry.
#include <c10/util/StringUtil.h>
#include <ATen/ops/max_pool2d.h>

#include <string>
#include <utility>

#include "tp/cpp/guard.h"
#include "tp/cpp/model_state.h"
#include "tp/cpp/plugin.h"
#include "vision_net.h"

namespace tp::vision {
namespace {

using tp::cpp::Failure;
using tp::cpp::plugin_host;

struct ModelInstance {
  std::shared_ptr<VisionNet> net;
  std::vector<tp::cpp::StateEntry> state;  ///< lent by visit_state; rebuilt by create and to_device
};

ModelInstance& as_model(void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "model instance is NULL");
  return *static_cast<ModelInstance*>(self);
}

template <NetFactory kMake>
tp_status create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
  TP_GUARD(plugin_host(), {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "create: out_self is NULL");
    *out_self = nullptr;
    auto instance = std::make_unique<ModelInstance>();
    instance->net = kMake(tp::cpp::ConfigReader(cfg));
    instance->state = tp::cpp::collect_state(*instance->net);
    *out_self = instance.release();
    return TP_OK;
  });
}

void destroy(void* self) { delete static_cast<ModelInstance*>(self); }

tp_status to_device(void* self, int32_t device_type, int32_t device_index, int32_t dtype) {
  TP_GUARD(plugin_host(), {
    ModelInstance& m = as_model(self);
    const at::ScalarType target = tp::cpp::float_dtype(dtype);
    tp::cpp::move_state(m.state, tp::cpp::device_of(device_type, device_index), target);
    m.net->set_dtype(target);
    m.state = tp::cpp::collect_state(*m.net);
    return TP_OK;
  });
}

tp_status set_training(void* self, bool training) {
  TP_GUARD(plugin_host(), {
    as_model(self).net->train(training);
    return TP_OK;
  });
}

tp_status visit_state(void* self, tp_state_visitor visit, void* user) {
  TP_GUARD(plugin_host(), {
    return tp::cpp::visit_state_entries(as_model(self).state, visit, user);
  });
}

tp_status forward(void* self, const tp_named_tensor_t* inputs, uint32_t input_count,
                  tp_named_tensor_t* out_outputs, uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(plugin_host(), {
    if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "forward: out_count is NULL");
    *out_count = 0;
    if (inputs == nullptr && input_count > 0)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "forward: inputs is NULL");
    std::vector<NamedOutput> outputs = as_model(self).net->forward_named(inputs, input_count);
    // Dropping outputs silently would surface later as a confusing "no output named ..." in the
    // loss, so a too-small array is an error.
    if (outputs.size() > capacity || out_outputs == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    "forward: the model has " + std::to_string(outputs.size()) +
                        " outputs but capacity is " + std::to_string(capacity));
    for (size_t i = 0; i < outputs.size(); ++i)
      out_outputs[i] = {outputs[i].name, tp::cpp::new_handle(std::move(outputs[i].tensor))};
    *out_count = static_cast<uint32_t>(outputs.size());
    return TP_OK;
  });
}

/// The model behind an instance, for tp::cpp::set_activation_checkpointing_entry.
VisionNet& as_net(void* self) { return *as_model(self).net; }

template <NetFactory kMake>
constexpr tp_model_v1_t model_table() {
  return {sizeof(tp_model_v1_t), &create<kMake>, &destroy, &to_device,
          &set_training,         &visit_state,   &forward,
          &tp::cpp::set_activation_checkpointing_entry<&as_net>};
}

const tp_model_v1_t kMlpTable = model_table<&make_mlp>();
const tp_model_v1_t kSmallCnnTable = model_table<&make_small_cnn>();
const tp_model_v1_t kMultiHeadCnnTable = model_table<&make_multi_head_cnn>();
const tp_model_v1_t kTwoStreamTable = model_table<&make_two_stream>();
const tp_model_v1_t kDeepCnnTable = model_table<&make_deep_cnn>();

}  // namespace

/* Shared pieces declared in vision_net.h */

at::Tensor VisionNet::image_input(const tp_named_tensor_t* inputs, uint32_t count,
                                  const std::string& name, int64_t channels, int64_t size) const {
  const at::Tensor& x = tp::cpp::find(inputs, count, name, "input");
  const bool ok = x.dim() == 4 && x.size(1) == channels && x.size(2) == size && x.size(3) == size &&
                  x.is_floating_point();
  if (!ok)
    throw Failure(TP_ERR_INVALID_ARGUMENT,
                  "input '" + name + "': expected a floating [B, " + std::to_string(channels) + ", " +
                      std::to_string(size) + ", " + std::to_string(size) + "] image, got " +
                      std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
  return x.scalar_type() == dtype_ ? x : x.to(dtype_);
}

at::Tensor VisionNet::flat_input(const tp_named_tensor_t* inputs, uint32_t count,
                                 const std::string& name, int64_t features) const {
  const at::Tensor& x = tp::cpp::find(inputs, count, name, "input");
  if (x.dim() < 1 || !x.is_floating_point() || x.numel() != x.size(0) * features)
    throw Failure(TP_ERR_INVALID_ARGUMENT,
                  "input '" + name + "': expected floating [B, ...] with " + std::to_string(features) +
                      " features per sample, got " + std::string(c10::toString(x.scalar_type())) +
                      " " + c10::str(x.sizes()));
  const at::Tensor flat = x.reshape({x.size(0), features});
  return flat.scalar_type() == dtype_ ? flat : flat.to(dtype_);
}

ConvTrunk::ConvTrunk(int64_t in_channels, int64_t width) : out_channels_(2 * width) {
  const int64_t channels[4] = {in_channels, width, 2 * width, 2 * width};
  for (int i = 0; i < 3; ++i) {
    // No conv bias: the BatchNorm shift that follows makes it redundant.
    convs_.push_back(register_module(
        "conv" + std::to_string(i + 1),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(channels[i], channels[i + 1], 3).padding(1).bias(false))));
    norms_.push_back(register_module("bn" + std::to_string(i + 1),
                                     torch::nn::BatchNorm2d(channels[i + 1])));
  }
}

at::Tensor ConvTrunk::forward(const at::Tensor& x) {
  at::Tensor h = x;
  for (size_t i = 0; i < convs_.size(); ++i) {
    // One checkpoint unit per block: with checkpointing only `h` is kept per block, not the conv,
    // BN and ReLU outputs and the pooling indices. The lambda is kept until backward, so it
    // captures by value.
    h = checkpoint_block({*convs_[i], *norms_[i]}, [this, i](const at::Tensor& in) { return block(i, in); }, h);
  }
  return h;
}

at::Tensor ConvTrunk::block(size_t i, const at::Tensor& x) {
  return at::max_pool2d(norms_[i]->forward(convs_[i]->forward(x)).relu_(), {2, 2});
}

void require_config(bool ok, const char* component, const char* key, const char* what,
                    const std::string& got) {
  if (!ok)
    throw Failure(TP_ERR_CONFIG, std::string(component) + ": " + key + " " + what + ", got " + got);
}

CnnConfig read_cnn_config(const tp::cpp::ConfigReader& cfg, const char* component) {
  CnnConfig c{cfg.get_int("in_channels"), cfg.get_int("num_classes"), cfg.get_int("width"),
              cfg.get_int("image_size")};
  require_config(c.in_channels > 0, component, "in_channels", "must be positive", std::to_string(c.in_channels));
  require_config(c.num_classes > 0, component, "num_classes", "must be positive", std::to_string(c.num_classes));
  require_config(c.width > 0, component, "width", "must be positive", std::to_string(c.width));
  require_config(c.image_size > 0 && c.image_size % 8 == 0, component, "image_size",
                 "must be a positive multiple of 8 (three 2x2 poolings)", std::to_string(c.image_size));
  return c;
}

}  // namespace tp::vision

namespace {
const tp::cpp::Component kComponents[] = {
    {&tp::vision::kMlpDescriptor, TP_IFACE_MODEL_V1, &tp::vision::kMlpTable},
    {&tp::vision::kSmallCnnDescriptor, TP_IFACE_MODEL_V1, &tp::vision::kSmallCnnTable},
    {&tp::vision::kMultiHeadCnnDescriptor, TP_IFACE_MODEL_V1, &tp::vision::kMultiHeadCnnTable},
    {&tp::vision::kTwoStreamDescriptor, TP_IFACE_MODEL_V1, &tp::vision::kTwoStreamTable},
    {&tp::vision::kDeepCnnDescriptor, TP_IFACE_MODEL_V1, &tp::vision::kDeepCnnTable},
};
}  // namespace

TP_DEFINE_PLUGIN("vision_models", TP_TORCH_BUILD_INFO_INIT, kComponents)
