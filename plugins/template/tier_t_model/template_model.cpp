// template_model: the smallest useful Tier T plugin, to copy and edit.
//
// Component org.example.linear (kind model, "tp.model/1") is y = x W^T + b over the batch field
// named by `input`, written to the output named by `output`. Tier T means the plugin shares the
// host's LibTorch: tensors cross as tp_tensor handles that wrap at::Tensor and keep autograd
// history, and the host refuses the library unless its build fingerprint (LibTorch version, C++11
// ABI, CPU/CUDA) matches its own (PLG-4). The defaults fit the c_regression test dataset
// (x: float32 [4] -> y: float32 [1]).
//
// Lifecycle the host drives: create -> to_device -> visit_state -> (set_training, forward)...
// -> destroy. The host owns training: it gets the parameters through visit_state, runs backward
// and the optimizer, and saves checkpoints; the plugin only builds the module and runs forward.
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/model_state.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/model.h"

namespace {

using tp::cpp::Failure;

/* 1. Schema (PLG-6). String defaults are TOML literals, so they carry their quotes. */
const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "in_features", TP_CFG_INT, "4", "size of each input sample"},
    {sizeof(tp_config_key_t), "out_features", TP_CFG_INT, "1", "size of each output sample"},
    {sizeof(tp_config_key_t), "input", TP_CFG_STRING, "\"x\"", "batch field the model reads"},
    {sizeof(tp_config_key_t), "output", TP_CFG_STRING, "\"y\"", "name of the output it writes"},
};

/* 2. Descriptor (PLG-2, PLG-5). The example input lets `host plugins check` run one forward
 *    with the default config: one float32 field "x" of 4 features per sample. */
const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "x", TP_DTYPE_FLOAT32, 1, {4}, 0},
};
const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t),
    "org.example.linear",
    TP_KIND_MODEL,
    TP_TIER_T,
    "0.1.0",
    "linear layer y = x W^T + b (template)",
    kKeys,
    static_cast<uint32_t>(sizeof(kKeys) / sizeof(kKeys[0])),
    kExamples,
    static_cast<uint32_t>(sizeof(kExamples) / sizeof(kExamples[0])),
    0,
};

/* 3. Instance. */
struct LinearModel {
  const tp_host_t* host; // borrowed until deinit()
  std::string input;
  std::string output;    // outputs point at this string: valid until destroy()
  torch::nn::Linear linear{nullptr};
  // visit_state lends handles to these entries, so the vector must not change until the next
  // collection. Each entry shares its parameter's TensorImpl, so the host's in-place updates
  // reach the module (tp/cpp/model_state.h).
  std::vector<tp::cpp::StateEntry> state;
};

LinearModel& as_model(void* self) {
  if (self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "linear: model instance is NULL");
  return *static_cast<LinearModel*>(self);
}

const tp_host_t* host_of(void* self) {
  return self != nullptr ? static_cast<LinearModel*>(self)->host : tp::cpp::plugin_host();
}

/* 4. Interface functions, each behind TP_GUARD (PLG-7). */

/// [main] Builds the module on the CPU in fp32; the host seeded the global generator, so the
/// initialisation is reproducible (PLG-8).
tp_status linear_create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
  TP_GUARD(host, {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "linear: out_self is NULL");
    const tp::cpp::ConfigReader config(cfg);
    const int64_t in_features = config.get_int("in_features");
    const int64_t out_features = config.get_int("out_features");
    if (in_features < 1 || out_features < 1)
      throw Failure(TP_ERR_CONFIG, "linear: in_features and out_features must be >= 1");
    auto model = std::make_unique<LinearModel>();
    model->host = host;
    model->input = config.get_string("input");
    model->output = config.get_string("output");
    model->linear = torch::nn::Linear(torch::nn::LinearOptions(in_features, out_features));
    model->state = tp::cpp::collect_state(*model->linear);
    *out_self = model.release();
    return TP_OK;
  });
}

/// [main] Accepts NULL (PLG-12).
void linear_destroy(void* self) { delete static_cast<LinearModel*>(self); }

/// [main] Moves parameters to the device and floating-point ones to `dtype`; handles from an
/// earlier visit_state are invalid afterwards, so the state is collected again.
tp_status linear_to_device(void* self, int32_t device_type, int32_t device_index, int32_t dtype) {
  TP_GUARD(host_of(self), {
    LinearModel& m = as_model(self);
    // move_state keeps integer buffers integer (Module::to would not); Linear has none, but a
    // copied model with BatchNorm does.
    tp::cpp::move_state(m.state, tp::cpp::device_of(device_type, device_index), tp::cpp::float_dtype(dtype));
    m.state = tp::cpp::collect_state(*m.linear);
    return TP_OK;
  });
}

/// [main] Linear has no dropout or batch norm, but train()/eval() is what a copied model needs.
tp_status linear_set_training(void* self, bool training) {
  TP_GUARD(host_of(self), {
    as_model(self).linear->train(training);
    return TP_OK;
  });
}

/// [main] Every parameter, then every buffer, with stable names and order. Handles are borrowed.
tp_status linear_visit_state(void* self, tp_state_visitor visit, void* user) {
  TP_GUARD(host_of(self), {
    return tp::cpp::visit_state_entries(as_model(self).state, visit, user);
  });
}

/// [main] One output, a new reference the host releases. Grad mode and autocast are already
/// set; nothing here reads a value back to the CPU, which would synchronize the device (PLG-11).
tp_status linear_forward(void* self, const tp_named_tensor_t* inputs, uint32_t input_count,
                         tp_named_tensor_t* out_outputs, uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(host_of(self), {
    LinearModel& m = as_model(self);
    if (out_outputs == nullptr || out_count == nullptr || capacity < 1)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "linear: forward needs room for one output");
    const at::Tensor& x = tp::cpp::find(inputs, input_count, m.input, "input");
    out_outputs[0] = {m.output.c_str(), tp::cpp::new_handle(m.linear->forward(x))};
    *out_count = 1;
    return TP_OK;
  });
}

const tp_model_v1_t kModelTable = {
    sizeof(tp_model_v1_t), &linear_create,      &linear_destroy, &linear_to_device,
    &linear_set_training,  &linear_visit_state, &linear_forward,
};

/* 5. Entry (PLG-1). TP_TORCH_BUILD_INFO_INIT is the fingerprint the host compares (PLG-4). */
const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_MODEL_V1, &kModelTable},
};

}  // namespace

TP_DEFINE_PLUGIN("template_model", TP_TORCH_BUILD_INFO_INIT, kComponents)
