#include "tp/framework/checkpoint/checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/serialize/output-archive.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "tp/framework/error.h"

namespace tp {
namespace {

at::Tensor bytes_to_tensor(const std::string& bytes) {
  auto tensor = at::empty({static_cast<int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
  return tensor;
}

c10::List<std::string> to_list(const std::vector<std::string>& items) {
  c10::List<std::string> list;
  for (const auto& item : items) list.push_back(item);
  return list;
}

// torch::pickle_save with untagged containers: tagged ones pickle a call to
// torch.jit._pickle.restore_type_tag, which Python's torch.load refuses under weights_only=True
// (the default since PyTorch 2.6). Plain dicts, lists, strings, numbers and tensors load there.
std::vector<char> pickle_for_python(const c10::IValue& value) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> container;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    container.insert(container.end(), static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return container;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const CheckpointContents& c) {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("format", std::string(kCheckpointFormat));
  c10::Dict<std::string, at::Tensor> model;
  // CPU copies keep the file loadable on machines without the training device.
  for (const auto& entry : *c.model_state) model.insert(entry.name, entry.tensor.detach().to(at::kCPU).contiguous());
  root.insert("model", model);
  if (c.optimizer != nullptr) {
    torch::serialize::OutputArchive archive;
    c.optimizer->save(archive);
    std::ostringstream bytes;
    archive.save_to(bytes);
    root.insert("optimizer", bytes_to_tensor(bytes.str()));
    c10::List<c10::List<std::string>> groups;
    for (const auto& names : c.optimizer_groups) groups.push_back(to_list(names));
    root.insert("optimizer_groups", groups);
  }
  root.insert("scheduler", at::tensor(c.scheduler_state, at::TensorOptions().dtype(at::kDouble)));
  c10::impl::GenericDict scaler(c10::StringType::get(), c10::AnyType::get());
  scaler.insert("scale", c.scaler_scale);
  scaler.insert("growth_tracker", c.scaler_growth_tracker);
  root.insert("scaler", scaler);
  root.insert("epoch", c.epoch);
  root.insert("batch", c.batch);
  if (c.rng_cpu.defined()) root.insert("rng_cpu", c.rng_cpu);
  if (c.rng_cuda.defined()) root.insert("rng_cuda", c.rng_cuda);
  // Lists of numbers pickle as torch.jit._pickle.build_doublelist, which weights_only loading
  // refuses: numeric vectors travel as float64 tensors.
  root.insert("running_loss", at::tensor(c.running_loss, at::TensorOptions().dtype(at::kDouble)));
  root.insert("early_stopping", at::tensor(c.early_stopping, at::TensorOptions().dtype(at::kDouble)));
  root.insert("step", c.step);
  root.insert("world_size", c.world_size);
  root.insert("monitor", c.monitor);
  root.insert("best", c.best);
  root.insert("config", c.config_toml);
  root.insert("plugins", to_list(c.plugins));
  const std::vector<char> bytes = pickle_for_python(c10::IValue(root));
  write_file_atomically(path, bytes.data(), bytes.size());
}

LoadedCheckpoint load_checkpoint(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint " + path.string() + " cannot be opened (missing or unreadable).");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LoadedCheckpoint out;
  try {
    const c10::IValue value = torch::pickle_load(bytes);
    if (!value.isGenericDict()) throw Error("not a dict");
    const auto root = value.toGenericDict();
    if (!root.contains("format") || root.at("format").toStringRef() != kCheckpointFormat)
      throw Error("its format is not " + std::string(kCheckpointFormat));
    for (const auto& item : root.at("model").toGenericDict())
      out.model.emplace_back(item.key().toStringRef(), item.value().toTensor());
    if (root.contains("optimizer")) {
      const at::Tensor t = root.at("optimizer").toTensor().contiguous();
      const auto* data = static_cast<const char*>(t.data_ptr());
      out.optimizer_archive.assign(data, data + t.numel());
    }
    if (root.contains("scheduler")) {
      const at::Tensor t = root.at("scheduler").toTensor().contiguous().to(at::kDouble);
      out.scheduler_state.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    }
    if (root.contains("scaler")) {
      const auto scaler = root.at("scaler").toGenericDict();
      out.scaler_scale = scaler.at("scale").toDouble();
      out.scaler_growth_tracker = scaler.at("growth_tracker").toInt();
    }
    out.epoch = root.at("epoch").toInt();
    if (root.contains("batch")) out.batch = root.at("batch").toInt();
    if (root.contains("rng_cpu")) out.rng_cpu = root.at("rng_cpu").toTensor();
    if (root.contains("rng_cuda")) out.rng_cuda = root.at("rng_cuda").toTensor();
    if (root.contains("running_loss")) {
      const at::Tensor t = root.at("running_loss").toTensor().contiguous().to(at::kDouble);
      out.running_loss.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    }
    out.step = root.at("step").toInt();
    if (root.contains("world_size")) out.world_size = root.at("world_size").toInt();
    if (root.contains("early_stopping")) {
      const at::Tensor t = root.at("early_stopping").toTensor().contiguous().to(at::kDouble);
      out.early_stopping.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    }
    out.monitor = root.at("monitor").toStringRef();
    out.best = root.at("best").toDouble();
    out.config_toml = root.at("config").toStringRef();
    for (const auto& p : root.at("plugins").toListRef()) out.plugins.push_back(p.toStringRef());
  } catch (const std::exception& e) {
    throw Error("checkpoint " + path.string() + " is damaged or not a torchhost checkpoint (" +
                std::string(e.what()).substr(0, 200) + "). Use another checkpoint, e.g. checkpoints/best.pt.");
  }
  return out;
}

void restore_model_state(const LoadedCheckpoint& checkpoint, const std::vector<StateTensor>& model_state) {
  std::map<std::string, const at::Tensor*> saved;
  for (const auto& [name, tensor] : checkpoint.model) saved.emplace(name, &tensor);
  std::string problems;
  std::vector<std::pair<const at::Tensor*, const at::Tensor*>> copies; // (destination, source)
  for (const auto& entry : model_state) {
    auto it = saved.find(entry.name);
    if (it == saved.end()) {
      problems += " missing '" + entry.name + "';";
      continue;
    }
    if (it->second->sizes() != entry.tensor.sizes()) {
      problems += " '" + entry.name + "' has shape " + c10::str(it->second->sizes()) + " in the checkpoint but " +
                  c10::str(entry.tensor.sizes()) + " in the model;";
    }
    copies.emplace_back(&entry.tensor, it->second);
    saved.erase(it);
  }
  for (const auto& [name, tensor] : saved) problems += " unexpected '" + name + "';";
  if (!problems.empty())
    throw Error("the checkpoint does not match the model:" + problems +
                " Was it written by a run with another model or model options?");
  at::NoGradGuard no_grad;
  for (const auto& [destination, source] : copies) destination->copy_(*source);
}

}  // namespace tp
