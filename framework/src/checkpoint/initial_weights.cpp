#include "tp/framework/checkpoint/initial_weights.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "python_pickle.h"
#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/checkpoint/safetensors.h"
#include "tp/framework/error.h"
#include "tp/framework/util/first_few.h"
#include "tp/framework/util/name_pattern.h"
#include "tp/framework/util/regular_file.h"
#include "torch_archive.h"

namespace tp {
namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

constexpr const char* kInitWeightsKey = "train.init_weights";

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw ConfigError(kInitWeightsKey, std::string(kInitWeightsKey) + " = \"" + file.string() + "\": " + what);
}

// A torch.save / torch::pickle_save zip: "data.pkl" plus one record per storage, "data/<key>".
// The checks the checkpoint reader makes (torch_archive.h), on the bytes read once: LibTorch's
// reader must not see a layout it leaks on or a pickle length it would allocate, and no tensor
// may reach past its storage record (the unpickler sizes storages by the pickle's claim, so the
// copy into the model would read past the buffer: tests/unit/checkpoint/initial_weights_zip_test.cpp).
Named read_torch_zip(const std::filesystem::path& file, const std::vector<char>& bytes, const ArchiveLabel& label) {
  std::vector<ZipRecord> records;
  try {
    verify_checkpoint(bytes.data(), bytes.size(), file.string(), &records);
  } catch (const CheckpointError& e) {
    throw CheckpointError(std::string(kInitWeightsKey) + ": " + e.what());  // the seal's message names the file
  }
  check_torch_layout(bytes, records, label);
  RecordSizes stored;
  // Python's pickles pass python_pickle.h's rewrite: what else the file holds (an optimizer's
  // state, timm's args, Lightning's callbacks) is read as plain values or stepped over as opaque
  // ones, never run. Host checkpoints pass it unchanged.
  const c10::IValue root = unpickle_archive(bytes, stored, readable_pickle);
  std::optional<Named> state = tensor_entries(root);
  // A host checkpoint keeps the weights under "model"; timm's train.py and Lightning's .ckpt under
  // "state_dict" (timm's load_checkpoint reads it too; timm's EMA copy, "state_dict_ema", is not read).
  if (!state && root.isGenericDict()) {
    const auto dict = root.toGenericDict();
    for (const char* key : {"model", "state_dict"})
      if (!state && dict.contains(key)) state = tensor_entries(dict.at(key));
  }
  if (!state) {
    // What it does hold, so that a user can see where the weights are.
    const std::string keys = top_level_keys(root);
    throw Error("it holds neither a dict of tensors (a state_dict) nor a dict with a \"model\" or \"state_dict\" "
                "dict of tensors (a host, timm or Lightning checkpoint)" +
                (keys.empty() ? std::string() : "; its top-level keys: " + keys) +
                ". Save the weights alone: torch.save(checkpoint[\"<the key holding them>\"], \"weights.pt\"); a prefix "
                "the model's names lack (Lightning's \"model.\", DDP's \"module.\") is then read away by "
                "train.init_weights_prefix");
  }
  for (const auto& [name, tensor] : *state) {
    if (plain_stored_tensor(tensor, stored)) continue;
    const std::string what = !tensor.defined() ? "is undefined"
                             : within_storage(tensor, stored)
                                 ? std::string("(") + c10::toString(tensor.scalar_type()) +
                                       ") is not a dense CPU tensor of a plain numeric dtype"
                                 : "claims more elements than its storage record holds";
    throw CheckpointError(label.subject + " is damaged or hostile: its tensor '" + name.substr(0, 100) + "' " + what +
                          ". " + label.advice);
  }
  return *state;
}

Named read_weights(const std::filesystem::path& file) {
  // Opened and read once: every check below and LibTorch's reader see these bytes, never the
  // file again (a file replaced between a check and a second open would skip the checks).
  // Regular files only, read by fstat's size: a FIFO had hung the run for good, /dev/zero filled
  // memory (security trial F3).
  std::vector<char> bytes;
  try {
    bytes = read_regular_file(file);
  } catch (const UnreadableFile& e) {
    fail(file, std::string("the file ") + e.what() + ". Give a host checkpoint, a torch.save(model.state_dict()) "
                                                      "file or a .safetensors file, or \"\" for the model's own init.");
  }
  const ArchiveLabel label{std::string(kInitWeightsKey) + " = \"" + file.string() + "\"",
                           "Give a torch.save(model.state_dict()) file, a host checkpoint or a .safetensors file "
                           "that loads, or \"\" for the model's own init."};
  // torch.save's legacy format starts with a pickled magic number: PROTO 2, then LONG1 of 10
  // bytes (torch/serialization.py, MAGIC_NUMBER). Named, instead of a safetensors parse error.
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0x80 && static_cast<unsigned char>(bytes[2]) == 0x8a)
    fail(file, "it is a torch.save file in the legacy format (saved with _use_new_zipfile_serialization=False, or "
               "by PyTorch before 1.6), which the host does not read. Save it again in the zip format, the "
               "default: python -c \"import torch; torch.save(torch.load('OLD', weights_only=True), 'NEW.pt')\".");
  try {
    // The checks --resume makes, before LibTorch reads a byte: a host checkpoint's seal, that
    // every zip record lies inside the file, the archive's layout and pickle lengths, and after
    // unpickling that every tensor lies inside its storage record. A damaged or hostile archive
    // is refused naming the key and the file (CheckpointError, exit 4).
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) return read_torch_zip(file, bytes, label);
    return read_safetensors(bytes);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) why = c10->what_without_backtrace();
    // Our own sentences run to some 400 bytes (fine-tune trial F2: cut at 300, mid-word); a LibTorch
    // message without its backtrace stays within 1000.
    fail(file, "cannot read initial weights from it (" + why.substr(0, 1000) +
                   "). Expected a host checkpoint, a torch.save(model.state_dict()) file (zip format, the default "
                   "since PyTorch 1.6), a timm or Lightning checkpoint, or a .safetensors file; from a file that "
                   "will not read in Python, save the weights alone: torch.save(checkpoint[\"state_dict\"], "
                   "\"weights.pt\").");
  }
}

// The file's names under `prefix`, without it; the others are counted as left unread.
Named under_prefix(Named all, const std::string& prefix, const std::filesystem::path& file, InitialWeightsReport& report) {
  if (prefix.empty()) return all;
  Named kept;
  std::vector<std::string> others;
  for (auto& [name, tensor] : all) {
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0)
      kept.emplace_back(name.substr(prefix.size()), std::move(tensor));
    else others.push_back("'" + name + "'");
  }
  report.outside_prefix = static_cast<int64_t>(others.size());
  if (kept.empty())
    throw ConfigError("train.init_weights_prefix",
                      "train.init_weights_prefix = \"" + prefix + "\": no name in " + file.string() +
                          " begins with it (its names: " + first_few(others) +
                          "). Give the part before the model's own names, e.g. \"model.\" for a Lightning module "
                          "whose network is self.model, or \"\" to read the names as they are.");
  return kept;
}

// A prefix P under which the file holds every one of the model's `missing` names (P + name), as
// a Lightning checkpoint ("model.") or a DDP module's state_dict ("module.") does; "" if none.
std::string common_prefix(const std::vector<std::string>& missing, const Named& saved) {
  if (missing.empty()) return "";
  std::set<std::string> names;
  for (const auto& entry : saved) names.insert(entry.first);
  const std::string& first = missing.front();
  for (const auto& [name, tensor] : saved) {
    if (name.size() <= first.size() || name.compare(name.size() - first.size(), first.size(), first) != 0) continue;
    const std::string prefix = name.substr(0, name.size() - first.size());
    if (prefix.back() != '.') continue;
    if (std::all_of(missing.begin(), missing.end(), [&](const std::string& m) { return names.count(prefix + m) != 0; }))
      return prefix;
  }
  return "";
}

}  // namespace

InitialWeightsReport load_initial_weights(const std::filesystem::path& file, const std::vector<StateTensor>& model_state,
                                          const std::vector<std::string>& ignore, const std::string& prefix) {
  InitialWeightsReport report;
  const Named saved = under_prefix(read_weights(file), prefix, file, report);
  std::vector<bool> used(ignore.size(), false);
  const auto ignored = [&](const std::string& name) {
    bool any = false;
    for (size_t i = 0; i < ignore.size(); ++i)
      if (name_matches(ignore[i], name)) any = used[i] = true;
    return any;
  };
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : saved) {
    if (ignored(name)) report.ignored_file.push_back(name);
    else by_name.emplace(name, &tensor);
  }
  std::vector<std::string> missing, missing_names, mis_shaped;
  struct Copy {
    const std::string* name;
    const at::Tensor* destination; ///< the model's tensor
    const at::Tensor* source;      ///< the file's
  };
  std::vector<Copy> copies;
  for (const auto& entry : model_state) {
    if (ignored(entry.name)) {
      report.kept_model.push_back(entry.name);
      continue;
    }
    const auto it = by_name.find(entry.name);
    if (it == by_name.end()) {
      missing.push_back("'" + entry.name + "'");
      missing_names.push_back(entry.name);
      continue;
    }
    if (it->second->sizes() != entry.tensor.sizes())
      mis_shaped.push_back("'" + entry.name + "' " + c10::str(it->second->sizes()) + " in the file, " +
                           c10::str(entry.tensor.sizes()) + " in the model");
    copies.push_back({&entry.name, &entry.tensor, it->second});
    by_name.erase(it);
  }
  for (size_t i = 0; i < ignore.size(); ++i)
    if (!used[i]) {
      const std::string key = "train.init_weights_ignore[" + std::to_string(i) + "]";
      throw ConfigError(key, key + " = \"" + ignore[i] + "\" matches no name in the model or in " + file.string() +
                                 ". A pattern is a shell glob over the whole name (`*` also crosses dots), e.g. "
                                 "\"fc.*\" or \"classifier.*\"; `host plugins check` lists the model's names.");
    }
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : saved)
    if (by_name.count(name) != 0) unexpected.push_back("'" + name + "'");
  if (!missing.empty() || !unexpected.empty() || !mis_shaped.empty()) {
    std::string what = "the file does not match the model (strict, by parameter and buffer name):";
    if (!missing.empty()) what += " missing " + first_few(missing) + ";";
    if (!unexpected.empty()) what += " unexpected " + first_few(unexpected) + ";";
    if (!mis_shaped.empty()) what += " other shapes: " + first_few(mis_shaped) + ";";
    const std::string found = common_prefix(missing_names, saved);
    if (!found.empty())
      what += " every missing name is in the file under \"" + found + "\" (a Lightning module's self.model, a DDP "
              "module's state_dict): read them with train.init_weights_prefix = \"" + prefix + found + "\";";
    fail(file, what + " the model's names are listed by `host plugins check`. Save the state_dict of a module "
                      "built with the same structure and options as [model]" +
                      (ignore.empty() ? std::string(", or leave a new head out with train.init_weights_ignore = "
                                                    "[\"<head>.*\"] when only its class count differs.")
                                      : std::string(".")));
  }
  // A NaN or an infinity in the file would surface as "the update of step 1 produced a non-finite
  // value" (the guard of the first save); named here instead, with the tensor, before any copy.
  std::vector<std::string> non_finite;
  for (const Copy& c : copies)
    if (c.source->is_floating_point() && !at::isfinite(*c.source).all().item<bool>()) non_finite.push_back("'" + *c.name + "'");
  if (!non_finite.empty())
    fail(file, "it holds NaN or infinite values in " + first_few(non_finite) +
                   "; these weights cannot start a training. Export them again from a run that ended finite, or "
                   "leave those tensors out with train.init_weights_ignore.");
  at::NoGradGuard no_grad;
  for (const Copy& c : copies) c.destination->copy_(*c.source);
  report.loaded = static_cast<int64_t>(copies.size());
  return report;
}

}  // namespace tp
