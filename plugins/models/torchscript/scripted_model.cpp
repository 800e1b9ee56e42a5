// org.torchhost.torchscript: loading, checking and running the scripted module.
#include "scripted_model.h"

#include <ATen/core/Dict.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <ATen/core/List.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/jit_type.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "tp/cpp/guard.h"
#include "tp/cpp/tensor.h"

namespace tp::torchscript {
namespace {

using tp::cpp::Failure;

constexpr const char* kHowToSave =
    "Write the file in Python with torch.jit.script(model).save(\"m.pt\") (torch.save(model), a state_dict "
    "file and a torch.export .pt2 archive are not TorchScript).";

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", \"" : "\"") + names[i] + "\"";
  return out + "]";
}

/// The first sentence of LibTorch's message (the rest speculates about corrupted files).
std::string first_sentence(const std::string& text) {
  const size_t end = std::min(text.find('\n'), text.find(". "));
  return text.substr(0, end);
}

/// A torch.save zip (a state_dict or a pickled nn.Module): "data.pkl" without TorchScript's
/// "constants.pkl". Reads the zip's directory only.
bool is_torch_save_archive(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    return reader.hasRecord("data.pkl") && !reader.hasRecord("constants.pkl");
  } catch (const c10::Error&) {
    return false;
  }
}

bool is_tensor(const c10::TypePtr& type) { return type->isSubtypeOf(*c10::TensorType::get()); }

/// The zip magic every TorchScript archive starts with; tells "some other file" apart early.
bool starts_like_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0;
}

}  // namespace

ScriptedModel::ScriptedModel(ScriptedModelOptions options) : options_(std::move(options)) {
  const std::string where = std::string(kId) + ": path = \"" + options_.path_as_given + "\"";
  std::error_code error;
  if (!std::filesystem::is_regular_file(options_.path, error)) {
    const std::string relative =
        std::filesystem::path(options_.path_as_given).is_relative()
            ? " (a relative path is resolved against the working directory " +
                  std::filesystem::current_path(error).string() + ")"
            : "";
    throw Failure(TP_ERR_IO, where + ": " +
                                 (std::filesystem::exists(options_.path, error) ? "is not a regular file"
                                                                                 : "no such file") +
                                 relative + ". Point [model] path at a TorchScript file. " + kHowToSave);
  }
  if (!starts_like_zip(options_.path))
    throw Failure(TP_ERR_CONFIG, where + " is not a TorchScript archive (not a zip file). " + kHowToSave);
  try {
    module_ = torch::jit::load(options_.path, at::Device(at::kCPU));
  } catch (const c10::Error& e) {
    if (is_torch_save_archive(options_.path))
      throw Failure(TP_ERR_CONFIG, where + " is a torch.save file (a state_dict or a pickled module), not a "
                                           "TorchScript archive. " + kHowToSave +
                                           " A state_dict belongs in train.init_weights of a model with the same names.");
    throw Failure(TP_ERR_CONFIG, where + " is not a TorchScript archive LibTorch can load (" +
                                     first_sentence(e.what_without_backtrace()) + "). " + kHowToSave);
  }

  // 1. Arity: inputs are passed positionally, so their number must fit forward's signature.
  const auto forward = module_.find_method("forward");
  if (!forward) throw Failure(TP_ERR_CONFIG, where + ": the module has no forward method. " + kHowToSave);
  const c10::FunctionSchema& schema = forward->function().getSchema();
  const auto& arguments = schema.arguments();  // arguments[0] is self
  size_t required = 0;
  std::string signature;
  for (size_t i = 1; i < arguments.size(); ++i) {
    if (!arguments[i].default_value()) ++required;
    signature += (i > 1 ? ", " : "") + arguments[i].name() + ": " + arguments[i].type()->annotation_str();
  }
  const size_t total = arguments.empty() ? 0 : arguments.size() - 1;
  if (options_.inputs.size() < required || options_.inputs.size() > total)
    throw Failure(TP_ERR_CONFIG,
                  where + ": forward(" + signature + ") takes " +
                      (required == total ? std::to_string(total) : std::to_string(required) + " to " + std::to_string(total)) +
                      (total == 1 ? " argument" : " arguments") + " but inputs = " + quoted_list(options_.inputs) + " names " +
                      std::to_string(options_.inputs.size()) + ". List one batch field per argument, in order.");

  // 2. Outputs: named from the declared return type.
  const c10::TypePtr& type = schema.returns().at(0).type();
  const std::string returns = type->annotation_str();
  auto unsupported = [&]() {
    return Failure(TP_ERR_CONFIG, where + ": forward returns " + returns +
                                      "; supported are Tensor, Tuple[Tensor, ...], List[Tensor] and "
                                      "Dict[str, Tensor]. Return tensors from forward (a wrapper module can "
                                      "convert other results).");
  };
  size_t expected = 1;
  if (is_tensor(type)) {
    kind_ = OutputKind::kTensor;
  } else if (const auto* tuple = type->castRaw<c10::TupleType>()) {
    for (const c10::TypePtr& element : tuple->elements())
      if (!is_tensor(element)) throw unsupported();
    kind_ = OutputKind::kTuple;
    expected = tuple->elements().size();
  } else if (const auto* list = type->castRaw<c10::ListType>()) {
    if (!is_tensor(list->getElementType())) throw unsupported();
    kind_ = OutputKind::kList;
    expected = 0;  // known at run time
  } else if (const auto* dict = type->castRaw<c10::DictType>()) {
    if (dict->getKeyType()->kind() != c10::TypeKind::StringType || !is_tensor(dict->getValueType()))
      throw unsupported();
    kind_ = OutputKind::kDict;
  } else {
    throw unsupported();
  }
  if (kind_ != OutputKind::kDict) {
    std::set<std::string> seen(options_.outputs.begin(), options_.outputs.end());
    if (seen.size() != options_.outputs.size() || options_.outputs.empty())
      throw Failure(TP_ERR_CONFIG, where + ": outputs = " + quoted_list(options_.outputs) +
                                       " must name each output once (at least one name).");
    if (expected != 0 && options_.outputs.size() != expected)
      throw Failure(TP_ERR_CONFIG, where + ": forward returns " + returns + " (" + std::to_string(expected) +
                                       (expected == 1 ? " tensor" : " tensors") + ") but outputs = " +
                                       quoted_list(options_.outputs) + " names " +
                                       std::to_string(options_.outputs.size()) + ". Give one name per tensor, in order.");
    for (const std::string& name : options_.outputs) output_names_.push_back(intern(name));
  }
}

const char* ScriptedModel::intern(const std::string& name) { return names_.insert(name).first->c_str(); }

tp::cpp::Outputs ScriptedModel::forward(const tp::cpp::Inputs& fields) {
  std::vector<c10::IValue> arguments;
  arguments.reserve(options_.inputs.size());
  for (const std::string& name : options_.inputs) {
    const at::Tensor& x = fields.get(name);
    arguments.emplace_back(x.is_floating_point() && x.scalar_type() != dtype_ ? x.to(dtype_) : x);
  }
  // TorchScript's profiling executor specialises the graph in the first training calls into one
  // that saves tensors for backward; run under the host's InferenceMode (an evaluation) it then
  // failed with "Inference tensors cannot be saved for backward" (data trial F23). An evaluation
  // runs it with autograd off instead, outside InferenceMode: nothing is saved, and the graph
  // executor sees a plain no-grad call.
  c10::IValue result;
  if (c10::InferenceMode::is_enabled()) {
    const c10::InferenceMode off(false);
    const at::NoGradGuard no_grad;
    result = module_.forward(std::move(arguments));
  } else {
    result = module_.forward(std::move(arguments));
  }

  tp::cpp::Outputs out;
  switch (kind_) {
    case OutputKind::kTensor:
      out.push_back({output_names_[0], result.toTensor()});
      break;
    case OutputKind::kTuple: {
      const auto& elements = result.toTupleRef().elements();
      for (size_t i = 0; i < elements.size(); ++i) out.push_back({output_names_[i], elements[i].toTensor()});
      break;
    }
    case OutputKind::kList: {
      const c10::List<at::Tensor> list = result.toTensorList();
      if (list.size() != options_.outputs.size())
        throw Failure(TP_ERR_INVALID_ARGUMENT,
                      std::string(kId) + ": forward returned a list of " + std::to_string(list.size()) +
                          " tensors but outputs = " + quoted_list(options_.outputs) + " names " +
                          std::to_string(options_.outputs.size()) + ". Give one name per tensor, in order.");
      for (size_t i = 0; i < list.size(); ++i) out.push_back({output_names_[i], list.get(i)});
      break;
    }
    case OutputKind::kDict:
      for (const auto& item : result.toGenericDict())
        out.push_back({intern(item.key().toStringRef()), item.value().toTensor()});
      break;
  }
  return out;
}

}  // namespace tp::torchscript
