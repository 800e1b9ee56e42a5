// org.torchhost.torchscript: a TorchScript module (torch.jit.script(model).save(path)) loaded
// with torch::jit::load and driven as a tp.model/1 model.
//
// The module is trained in place: its parameters and buffers are handed to the host under their
// TorchScript names (named_parameters / named_buffers, e.g. "fc1.weight", "bn.running_mean"),
// so a host checkpoint or `host export` loads back into the Python module with
// `module.load_state_dict(...)`. The output type is read from forward's schema when the module
// is loaded, so a module whose outputs cannot be named fails at create, not in the first step.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tp/cpp/model_adapter.h"

namespace tp::torchscript {

/// The plugin's id: its messages start with it.
inline constexpr const char* kId = "org.torchhost.torchscript";

/// What the config chooses (after path resolution).
struct ScriptedModelOptions {
  std::string path;                  ///< the archive, as it is opened
  std::string path_as_given;         ///< the config's value, for messages
  std::vector<std::string> inputs;   ///< batch fields passed positionally to forward
  std::vector<std::string> outputs;  ///< names of a Tensor / tuple / list output
};

/// How forward's result is named (from its declared return type).
enum class OutputKind { kTensor, kTuple, kList, kDict };

class ScriptedModel {
 public:
  /// Loads and checks the module on the CPU. Throws tp::cpp::Failure: TP_ERR_IO (missing or
  /// unreadable file), TP_ERR_CONFIG (not a TorchScript archive, forward's arity against
  /// `inputs`, a return type other than Tensor, a tuple or list of Tensors or Dict[str, Tensor],
  /// or `outputs` not matching it).
  explicit ScriptedModel(ScriptedModelOptions options);

  /// Runs forward on the fields named by `inputs` (floating ones cast to dtype()). Output names
  /// live as long as this object. Throws tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT) for a missing
  /// field or a result that does not match the declared outputs (a list of another length).
  tp::cpp::Outputs forward(const tp::cpp::Inputs& fields);

  /// Switches training mode of the module and every submodule (dropout, batch norm).
  void train(bool on) { module_.train(on); }
  /// The module whose parameters and buffers the host trains (tp/cpp/model_adapter.h moves them
  /// in to_device, TensorImpls kept, integer buffers kept integer).
  torch::jit::Module& state_root() { return module_; }
  /// The floating dtype of the parameters after to_device; floating inputs are cast to it.
  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }
  at::ScalarType dtype() const { return dtype_; }

 private:
  /// A name whose storage lives as long as this object (dict keys arrive at run time).
  const char* intern(const std::string& name);

  ScriptedModelOptions options_;
  torch::jit::Module module_;
  OutputKind kind_ = OutputKind::kTensor;
  at::ScalarType dtype_ = at::kFloat;
  std::set<std::string> names_;             // node-based: element addresses are stable
  std::vector<const char*> output_names_;  // interned `outputs`, for Tensor / tuple / list results
};

}  // namespace tp::torchscript
