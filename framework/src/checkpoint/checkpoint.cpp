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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <string_view>

#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/error.h"
#include "tp/framework/util/regular_file.h"
#include "tp/framework/util/first_few.h"
#include "foreign_checkpoint.h"
#include "torch_archive.h"

namespace tp {
namespace {

c10::List<std::string> to_list(const std::vector<std::string>& items) {
  c10::List<std::string> list;
  for (const auto& item : items) list.push_back(item);
  return list;
}

// torch::pickle_save with untagged containers: tagged ones pickle a call to
// torch.jit._pickle.restore_type_tag, which Python's torch.load refuses under weights_only=True
// (the default since PyTorch 2.6). Plain dicts, lists, strings, numbers and tensors load there.
// The pickle (the structure, without tensor bytes) is small; the zip archive around it and the
// tensors streams into `append` through the seal, as torch.save streams to its file (user trial:
// the whole archive built in a growing buffer first took 2.2x torch.save's time and raised the
// peak memory by 3x the file's size).
void write_pickled_for_python(const c10::IValue& value, const AppendBytes& append) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  // A failed write (a full disk) must not escape through LibTorch's zip writer: left half-done,
  // its destructor finishes the archive, fails again and terminates the process. Later bytes are
  // dropped and the first error is thrown once the archive has ended.
  std::exception_ptr failed;
  CheckpointSealer sealer([&](const char* bytes, std::size_t n) { // the CRC-32C every load verifies first
    if (failed) return;
    try {
      append(bytes, n);
    } catch (...) {
      failed = std::current_exception();
    }
  });
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    sealer.write(static_cast<const char*>(bytes), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  sealer.finish();
  if (failed) std::rethrow_exception(failed);
}

// The optimizer's state as LibTorch's own archive (its save/load pair), held as a byte tensor:
// the archive streams into pieces, copied once into the tensor (the peak is twice the state, not
// the four times an ostringstream, its str() and the tensor took).
at::Tensor optimizer_archive(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::vector<std::string> pieces;
  std::size_t total = 0;
  archive.save_to([&](const void* bytes, size_t n) -> size_t {
    pieces.emplace_back(static_cast<const char*>(bytes), n);
    total += n;
    return n;
  });
  auto tensor = at::empty({static_cast<int64_t>(total)}, at::TensorOptions().dtype(at::kByte));
  auto* out = static_cast<char*>(tensor.data_ptr());
  for (std::string& piece : pieces) {
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
    std::string().swap(piece);
  }
  return tensor;
}

// Whether `bytes` begin as a safetensors file does (what `host export` writes): an 8-byte
// little-endian header length that fits the file, then a JSON object. No checkpoint starts so: a
// zip starts with "PK".
bool looks_like_safetensors(const std::vector<char>& bytes) {
  if (bytes.size() < 10) return false;
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return length >= 2 && length <= bytes.size() - 8 && bytes[8] == '{';
}

// A tensor the reader may take raw bytes from: dense, on the CPU, of a plain numeric type. A
// pickle can describe anything (meta, sparse, quantized tensors), and data_ptr() of those is not
// a buffer of numel() elements.
const at::Tensor& plain_tensor(const c10::IValue& value, const char* key, const RecordSizes& records) {
  if (!value.isTensor()) throw Error(std::string("'") + key + "' is not a tensor");
  const at::Tensor& t = value.toTensor();
  if (!t.defined() || t.layout() != at::kStrided || !t.device().is_cpu() || t.is_quantized() || t.is_complex() ||
      !(at::isFloatingType(t.scalar_type()) || at::isIntegralType(t.scalar_type(), /*includeBool=*/false)))
    throw Error(std::string("'") + key + "' is not a dense CPU tensor of numbers");
  if (!within_storage(t, records)) throw Error(std::string("'") + key + "' claims more elements than its data holds");
  return t;
}

/// A {name: tensor} entry ("model", "ema", "swa"): dense CPU tensors within their records.
NamedWeights weight_entries(const c10::IValue& value, const char* key, const RecordSizes& records) {
  NamedWeights out;
  for (const auto& item : value.toGenericDict()) {
    const at::Tensor& t = item.value().toTensor();
    if (!plain_stored_tensor(t, records))
      throw Error(std::string(key) + " entry '" + item.key().toStringRef() + "' is not a dense CPU tensor within its data");
    out.emplace_back(item.key().toStringRef(), t);
  }
  return out;
}

std::vector<double> doubles(const c10::IValue& value, const char* key, const RecordSizes& records) {
  const at::Tensor t = plain_tensor(value, key, records).contiguous().to(at::kDouble);
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// Why LibTorch or the field checks refused the file, without LibTorch's backtrace and without the
// "INTERNAL ASSERT FAILED at <file>, please report a bug to PyTorch" of a failed type check, which
// blames PyTorch for a file that is only not what the reader expects.
std::string reader_reason(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string why = c10 != nullptr ? c10->what_without_backtrace() : e.what();
  if (const std::size_t assert_at = why.find("INTERNAL ASSERT FAILED"); assert_at != std::string::npos) {
    constexpr std::string_view kReport = "please report a bug to PyTorch.";
    const std::size_t report = why.find(kReport, assert_at);
    why = report == std::string::npos ? "LibTorch refused its contents" : why.substr(report + kReport.size());
    while (!why.empty() && why.front() == ' ') why.erase(0, 1);
  }
  return why.substr(0, 200);
}

std::vector<char> read_bytes(const std::filesystem::path& path) {
  try {
    // Regular files only, read once by fstat's size: a FIFO given to --resume had hung the run for
    // good holding its run.lock (security trial F3).
    return read_regular_file(path);
  } catch (const UnreadableFile& e) {
    throw CheckpointError("checkpoint " + path.string() + " " + e.what() +
                          "; a checkpoint is read from a regular file (a run's checkpoints/*.pt). Check the path, "
                          "or use --resume auto.");
  }
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const CheckpointContents& c) {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("format", std::string(kCheckpointFormat));
  c10::Dict<std::string, at::Tensor> model;
  // CPU copies keep the file loadable on machines without the training device.
  for (const auto& entry : *c.model_state) model.insert(entry.name, entry.tensor.detach().to(at::kCPU).contiguous());
  root.insert("model", model);
  for (const auto& average : c.averages) {
    c10::Dict<std::string, at::Tensor> weights;
    for (const auto& entry : *average.state) weights.insert(entry.name, entry.tensor.detach().to(at::kCPU).contiguous());
    root.insert(average.name, weights);
    root.insert(average.name + "_updates", average.updates);
  }
  if (!c.swa_schedule.empty())
    root.insert("swa_schedule", at::tensor(c.swa_schedule, at::TensorOptions().dtype(at::kDouble)));
  if (c.optimizer != nullptr) {
    root.insert("optimizer", optimizer_archive(*c.optimizer));
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
  root.insert("train_seconds", c.train_seconds);
  root.insert("micro_batch_splits", c.micro_batch_splits);
  root.insert("config", c.config_toml);
  root.insert("plugins", to_list(c.plugins));
  root.insert("provenance", c.provenance_toml);
  if (!c.run_id.empty()) root.insert("run_id", c.run_id);
  if (c.history_records >= 0) root.insert("history_records", c.history_records);
  if (c.eval_pending != 0) root.insert("eval_pending", c.eval_pending);
  if (c.train_samples >= 0) root.insert("train_samples", c.train_samples);
  if (c.epoch_skipped != 0) root.insert("epoch_skipped", c.epoch_skipped);
  if (!c.classes.empty()) {
    root.insert("class_field", c.classes.field);
    root.insert("classes", to_list(c.classes.names));
  }
  write_file_atomically(path, [&](const AppendBytes& append) { write_pickled_for_python(c10::IValue(root), append); });
}

LoadedCheckpoint load_checkpoint(const std::filesystem::path& path) {
  return read_checkpoint(read_bytes(path), path.string());
}

LoadedCheckpoint read_checkpoint(const std::vector<char>& bytes, const std::string& name) {
  // 0. An export handed over as a checkpoint (deployment trial F10) is no damaged checkpoint.
  if (looks_like_safetensors(bytes))
    throw CheckpointError("checkpoint " + name + " is a safetensors file, such as `host export` writes, not a "
                          "checkpoint: host commands read a run's checkpoints (its checkpoints/*.pt: best, last or a "
                          "path), which hold what an export leaves out. Give the run's .pt; to predict from the "
                          "export itself, use the inference library (docs/deployment.md); to train from its weights, "
                          "name it in train.init_weights.");
  // 1. Integrity before LibTorch sees a byte: checksum, then zip bounds (CheckpointError).
  std::vector<ZipRecord> records;
  verify_checkpoint(bytes.data(), bytes.size(), name, &records);
  check_torch_layout(bytes, records, {"checkpoint " + name, "Use another checkpoint, e.g. checkpoints/best.pt."});
  // 2. Unpickle and check every field's type; anything unexpected is "not a torchhost checkpoint".
  LoadedCheckpoint out;
  try {
    RecordSizes records_read;
    const c10::IValue value = unpickle_archive(bytes, records_read);
    if (!value.isGenericDict()) throw Error("not a dict");
    const auto root = value.toGenericDict();
    if (!root.contains("format") || !root.at("format").isString() || root.at("format").toStringRef() != kCheckpointFormat)
      throw Error("its format is not " + std::string(kCheckpointFormat));
    out.model = weight_entries(root.at("model"), "model", records_read);
    for (const char* name : {"ema", "swa"}) {
      if (!root.contains(name)) continue;
      SavedAverage average{name, weight_entries(root.at(name), name, records_read), 0};
      const std::string updates = std::string(name) + "_updates";
      if (root.contains(updates)) average.updates = root.at(updates).toInt();
      if (average.updates < 0) throw Error("'" + updates + "' is negative");
      out.averages.push_back(std::move(average));
    }
    if (root.contains("swa_schedule")) out.swa_schedule = doubles(root.at("swa_schedule"), "swa_schedule", records_read);
    if (root.contains("optimizer")) {
      const at::Tensor t = plain_tensor(root.at("optimizer"), "optimizer", records_read).contiguous();
      if (t.scalar_type() != at::kByte) throw Error("'optimizer' is not a uint8 tensor");
      const auto* data = static_cast<const char*>(t.data_ptr());
      out.optimizer_archive.assign(data, data + t.numel());
    }
    if (root.contains("scheduler")) out.scheduler_state = doubles(root.at("scheduler"), "scheduler", records_read);
    if (root.contains("scaler")) {
      const auto scaler = root.at("scaler").toGenericDict();
      out.scaler_scale = scaler.at("scale").toDouble();
      out.scaler_growth_tracker = scaler.at("growth_tracker").toInt();
    }
    out.epoch = root.at("epoch").toInt();
    if (root.contains("batch")) out.batch = root.at("batch").toInt();
    if (root.contains("rng_cpu")) out.rng_cpu = plain_tensor(root.at("rng_cpu"), "rng_cpu", records_read);
    if (root.contains("rng_cuda")) out.rng_cuda = plain_tensor(root.at("rng_cuda"), "rng_cuda", records_read);
    if (root.contains("running_loss")) out.running_loss = doubles(root.at("running_loss"), "running_loss", records_read);
    out.step = root.at("step").toInt();
    if (root.contains("world_size")) out.world_size = root.at("world_size").toInt();
    if (root.contains("early_stopping")) out.early_stopping = doubles(root.at("early_stopping"), "early_stopping", records_read);
    out.monitor = root.at("monitor").toStringRef();
    out.best = root.at("best").toDouble();
    if (root.contains("train_seconds")) out.train_seconds = root.at("train_seconds").toDouble();
    if (root.contains("micro_batch_splits")) out.micro_batch_splits = root.at("micro_batch_splits").toInt();
    out.config_toml = root.at("config").toStringRef();
    for (const auto& p : root.at("plugins").toListRef()) out.plugins.push_back(p.toStringRef());
    if (root.contains("provenance")) out.provenance_toml = root.at("provenance").toStringRef();
    if (root.contains("run_id")) out.run_id = root.at("run_id").toStringRef();
    if (root.contains("history_records")) out.history_records = root.at("history_records").toInt();
    if (root.contains("eval_pending")) out.eval_pending = root.at("eval_pending").toInt();
    if (root.contains("train_samples")) out.train_samples = root.at("train_samples").toInt();
    if (root.contains("epoch_skipped")) out.epoch_skipped = root.at("epoch_skipped").toInt();
    if (root.contains("classes")) {
      out.classes.field = root.at("class_field").toStringRef();
      for (const auto& c : root.at("classes").toListRef()) out.classes.names.push_back(c.toStringRef());
      check_class_names(out.classes); // they end up in CSV rows and an export's metadata
    }
    if (out.epoch < 0 || out.batch < 0 || out.step < 0 || out.world_size < 1 || out.micro_batch_splits < 1 ||
        out.history_records < -1 || out.eval_pending < 0 || out.eval_pending > 2 || out.train_samples < -1 ||
        out.epoch_skipped < 0)
      throw Error("its position (epoch, batch, step, world_size, micro_batch_splits, history_records, eval_pending, "
                  "train_samples, epoch_skipped) is out of range");
  } catch (const std::exception& e) {
    // A state_dict, a timm or Lightning checkpoint is named as such (migration trial, finding 5).
    if (const auto note = foreign_checkpoint_note(bytes, name)) throw CheckpointError(*note);
    throw CheckpointError("checkpoint " + name + " is damaged or not a torchhost checkpoint (" + reader_reason(e) +
                          "). Use another checkpoint, e.g. checkpoints/best.pt.");
  }
  return out;
}

const SavedAverage* LoadedCheckpoint::average(const std::string& name) const {
  for (const auto& a : averages)
    if (a.name == name) return &a;
  return nullptr;
}

const NamedWeights& LoadedCheckpoint::weights(const std::string& which, const std::string& option) const {
  if (which == "live") return model;
  if (const SavedAverage* a = average(which)) return a->weights;
  std::string held = "live";
  for (const auto& a : averages) held += ", " + a.name;
  throw ConfigError(option, option + " " + which + ": the checkpoint holds no '" + which + "' weights (it holds: " +
                                held + "). Was the run trained with [" + which + "] enabled = true?");
}

std::string LoadedCheckpoint::monitored_weights() const {
  // The evaluator names an average's metrics "val_<name>/..." (engine/training/evaluator.cpp), as
  // load_best_at_end reads them. An average with no update yet (SWA before its first averaged
  // epoch) is only a copy of the initial weights: never measured, never the default.
  for (const auto& a : averages)
    if (a.updates > 0 && monitor.starts_with("val_" + a.name + "/")) return a.name;
  return "live";
}

void restore_model_state(const LoadedCheckpoint& checkpoint, const std::vector<StateTensor>& model_state) {
  restore_weights(checkpoint.model, model_state);
}

void restore_weights(const NamedWeights& weights, const std::vector<StateTensor>& model_state) {
  std::map<std::string, const at::Tensor*> saved;
  for (const auto& [name, tensor] : weights) saved.emplace(name, &tensor);
  // Named by the first few of each kind: a checkpoint of another model differs in hundreds of
  // tensors, and a 15 KB message listing them all hid what to do (issue 41, item 14).
  std::vector<std::string> missing, reshaped, unexpected;
  std::vector<std::pair<const at::Tensor*, const at::Tensor*>> copies; // (destination, source)
  for (const auto& entry : model_state) {
    auto it = saved.find(entry.name);
    if (it == saved.end()) {
      missing.push_back("'" + entry.name + "'");
      continue;
    }
    if (it->second->sizes() != entry.tensor.sizes())
      reshaped.push_back("'" + entry.name + "' " + c10::str(it->second->sizes()) + " in the checkpoint, " +
                         c10::str(entry.tensor.sizes()) + " in the model");
    copies.emplace_back(&entry.tensor, it->second);
    saved.erase(it);
  }
  for (const auto& [name, tensor] : saved) unexpected.push_back("'" + name + "'");
  if (missing.empty() && reshaped.empty() && unexpected.empty()) {
    at::NoGradGuard no_grad;
    for (const auto& [destination, source] : copies) destination->copy_(*source);
    return;
  }
  std::string problems;
  if (!missing.empty()) problems += " missing " + first_few(missing) + ";";
  if (!unexpected.empty()) problems += " unexpected " + first_few(unexpected) + ";";
  if (!reshaped.empty()) problems += " other shapes: " + first_few(reshaped) + ";";
  // A configuration mismatch (the model section differs from the one that trained), as other
  // wrong settings are: exit 2.
  throw ConfigError("model", "the checkpoint does not match the model (" + std::to_string(model_state.size()) +
                                 " tensors in the model, " + std::to_string(weights.size()) + " in the checkpoint):" +
                                 problems + " Was it written by a run with another model or model options?");
}

}  // namespace tp
