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
// tp/cpp/model_adapter.h writes that C table from the class below: every call behind TP_GUARD
// (PLG-7), the state lent to the host and moved by to_device, outputs handed over only when
// forward succeeds (PLG-9), destroy(NULL) accepted (PLG-12).
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "tp/cpp/config.h"
#include "tp/cpp/model_adapter.h"
#include "tp/iface/model.h"

namespace {

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
const tp_descriptor_t kDescriptor =
    tp::cpp::model_descriptor("org.example.linear", "0.1.0", "linear layer y = x W^T + b (template)", kKeys, kExamples);

/* 3. The model: a torch::nn::Module. Its registered parameters and buffers are what the host
 *    trains and checkpoints, under their dotted names ("linear.weight"). */
class LinearModel : public torch::nn::Module {
 public:
  /// [main] Builds the module on the CPU in fp32 from the validated config; the host seeded the
  /// global generator, so the initialisation is reproducible (PLG-8). Throwing refuses the
  /// config: tp::cpp::Failure(TP_ERR_CONFIG, ...) reaches the user as a configuration error.
  explicit LinearModel(const tp::cpp::ConfigReader& config)
      : input_(config.get_string("input")),
        output_(config.get_string("output")),
        linear_(register_module("linear", torch::nn::Linear(config.get_int_in("in_features", 1, int64_t{1} << 32),
                                                            config.get_int_in("out_features", 1, int64_t{1} << 32)))) {}

  /// [main] One output, named by a string this model owns (valid until destroy). Grad mode and
  /// autocast are already set; nothing here reads a value back to the CPU, which would
  /// synchronize the device (PLG-11).
  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) {
    return {{output_.c_str(), linear_->forward(inputs.get(input_))}};
  }

 private:
  std::string input_;
  std::string output_;
  torch::nn::Linear linear_;
};

}  // namespace

/* 4. Entry (PLG-1): the library name equals the .so base name; TP_TORCH_BUILD_INFO_INIT is the
 *    fingerprint the host compares (PLG-4). */
TP_DEFINE_MODEL_PLUGIN("template_model", LinearModel, kDescriptor)
