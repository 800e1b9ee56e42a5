#include "foreign_checkpoint.h"

#include <ATen/core/ivalue.h>

#include <exception>
#include <utility>

#include "python_pickle.h"
#include "torch_archive.h"

namespace tp {
namespace {

// The first part of every name ("model." for a Lightning module's self.model, "module." for a DDP
// state_dict) when all names share one, else "".
std::string shared_prefix(const NamedWeights& weights) {
  std::string prefix;
  for (const auto& [name, tensor] : weights) {
    const std::size_t dot = name.find('.');
    if (dot == std::string::npos) return "";
    const std::string first = name.substr(0, dot + 1);
    if (!prefix.empty() && first != prefix) return "";
    prefix = first;
  }
  return prefix;
}

// What the file is, and the weights it holds where it holds some.
struct Described {
  std::string what;
  std::optional<NamedWeights> weights;
};

Described describe(const c10::impl::GenericDict& root) {
  if (auto weights = tensor_entries(c10::IValue(root)))
    return {"a plain state_dict (torch.save(model.state_dict()): " + std::to_string(weights->size()) + " tensors)",
            std::move(weights)};
  for (const char* key : {"state_dict", "model"}) {
    if (!root.contains(key)) continue;
    auto weights = tensor_entries(root.at(key));
    if (!weights) continue;
    const std::string where =
        std::string("its weights under \"") + key + "\" (" + std::to_string(weights->size()) + " tensors)";
    if (root.contains("pytorch-lightning_version"))
      return {"a Lightning checkpoint (Trainer.save_checkpoint), " + where, std::move(weights)};
    if (root.contains("arch") && (root.contains("args") || root.contains("optimizer") || root.contains("state_dict_ema")))
      return {"a timm train.py checkpoint, " + where, std::move(weights)};
    return {"a PyTorch file of another tool, " + where, std::move(weights)};
  }
  return {"a PyTorch file whose top-level dict holds no dict of tensors under \"state_dict\" or \"model\" (its keys: " +
              top_level_keys(c10::IValue(root)) + ")",
          std::nullopt};
}

}  // namespace

std::optional<std::string> foreign_checkpoint_note(const std::vector<char>& bytes, const std::string& name) {
  try {
    RecordSizes records;
    const c10::IValue value = unpickle_archive(bytes, records, readable_pickle);
    if (!value.isGenericDict()) return std::nullopt;
    const auto root = value.toGenericDict();
    if (root.contains("format")) return std::nullopt;  // a torchhost checkpoint, damaged
    const Described file = describe(root);
    std::string message = "checkpoint " + name + " is not a torchhost checkpoint: it is " + file.what +
                          ". --resume and --checkpoint read the checkpoints a torchhost run writes (its "
                          "checkpoints/*.pt), which also hold the run's optimizer, schedule and position. ";
    if (!file.weights)
      return message + "To start a run from weights in it, save them alone (torch.save(checkpoint[\"<key>\"], "
                       "\"weights.pt\")) and name that file in train.init_weights.";
    const std::string prefix = shared_prefix(*file.weights);
    message += "To start a run from its weights, train with train.init_weights = \"" + name + "\"";
    message += prefix.empty() ? " (with train.init_weights_prefix when its names sit under a prefix such as \"model.\")"
                              : " and train.init_weights_prefix = \"" + prefix + "\" (every name in it begins so)";
    return message + "; `host eval` and --resume then read that run's checkpoints.";
  } catch (const std::exception&) {
    return std::nullopt;  // not readable: the caller's message stands
  }
}

}  // namespace tp
