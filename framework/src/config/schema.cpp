#include "tp/framework/config/schema.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <set>

#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

using VT = ValueType;

std::vector<KeySpec> make_host_schema() {
  // One row per key. configs/reference.toml repeats these defaults; config_tests compares them.
  return {
      {"run.name", VT::String, R"("run")", "run name, shown in logs", {}},
      {"run.output_dir", VT::String, R"("runs/run")",
       "run directory (checkpoints, config.toml, logs); created if missing", {}},
      {"run.seed", VT::Int, "42", "seeds model init, shuffling and augmentation", {}},
      {"run.device", VT::String, R"("auto")", "auto = cuda when available, else cpu",
       {"auto", "cpu", "cuda", "cuda:N"}},
      {"run.deterministic", VT::Bool, "false",
       "deterministic algorithms only (errors on ops without one); cuDNN benchmark off", {}},
      {"run.threads", VT::Int, "0",
       "intra-op threads; 0 = physical cores minus loader threads (min 1)", {}},
      {"run.channels_last", VT::Bool, "false",
       "channels-last memory format for the model and 4-D inputs (faster convolutions on CUDA and oneDNN)", {}},
      {"run.cudnn_benchmark", VT::Bool, "false",
       "let cuDNN time convolution algorithms for each new shape (faster for fixed shapes; off when deterministic)", {}},
      {"run.tf32", VT::Bool, "false", "allow TF32 tensor cores for fp32 matmul and convolutions (CUDA, Ampere+)", {}},

      {"train.epochs", VT::Int, "10", "number of passes over the training set (>= 1)", {}},
      {"train.batch_size", VT::Int, "32", "samples per step, per process (>= 1)", {}},
      {"train.log_every_steps", VT::Int, "50",
       "read the loss (a device sync) and log every N steps (>= 1)", {}},
      {"train.drop_last", VT::Bool, "true", "drop the short last training batch", {}},
      {"train.grad_accum_steps", VT::Int, "1",
       "micro-batches per optimizer step; the loss is normalised over the whole window (>= 1)", {}},
      {"train.max_grad_norm", VT::Float, "0.0",
       "clip the global gradient norm to this, once per optimizer step after unscaling; 0 = off", {}},
      {"train.grad_norm_type", VT::Float, "2.0", "norm used by max_grad_norm (2 = Euclidean, inf = max)", {}},
      {"train.clip_value", VT::Float, "0.0", "clamp every gradient element to [-v, v]; 0 = off", {}},
      {"train.nan_policy", VT::String, R"("stop")",
       "non-finite training loss: stop (error naming step, batch, lr) or skip the optimizer step", {"stop", "skip"}},
      {"train.overfit_batches", VT::Int, "0",
       "sanity check: train and validate on the first N training batches, unshuffled; 0 = off", {}},
      {"train.fast_dev_run", VT::Bool, "false",
       "sanity check: one training step and one evaluation batch, no checkpoints or history", {}},
      {"train.init_weights", VT::String, R"("")",
       "start from these weights: a host checkpoint (its model entry), a torch.save(model.state_dict()) file or a "
       ".safetensors file; names and shapes must match the model exactly; \"\" = the model's own init; ignored "
       "by --resume", {}},

      {"eval.batch_size", VT::Int, "0", "evaluation batch size; 0 = train.batch_size", {}},
      {"eval.strategy", VT::String, R"("epoch")", "when to evaluate: every `every` epochs, every `every` optimizer steps, or never",
       {"epoch", "steps", "no"}},
      {"eval.every", VT::Int, "1", "evaluation interval in units of `strategy` (>= 1)", {}},

      {"optim.name", VT::String, R"("adamw")", "optimizer", {"sgd", "adam", "adamw", "rmsprop"}},
      {"optim.lr", VT::Float, "1e-3", "learning rate (> 0)", {}},
      {"optim.weight_decay", VT::Float, "0.01",
       "weight decay (>= 0): decoupled for adamw, added to the gradient (L2) for sgd, adam, rmsprop; only on "
       "tensors with dim >= 2 unless a param group sets it", {}},
      {"optim.momentum", VT::Float, "0.9", "sgd and rmsprop momentum, in [0, 1)", {}},
      {"optim.nesterov", VT::Bool, "false", "sgd Nesterov momentum", {}},
      {"optim.betas", VT::FloatArray, "[0.9, 0.999]", "adam, adamw betas, two values in [0, 1)", {}},
      {"optim.eps", VT::Float, "1e-8", "adam, adamw, rmsprop epsilon (> 0)", {}},
      {"optim.amsgrad", VT::Bool, "false", "adam, adamw: AMSGrad variant", {}},
      {"optim.alpha", VT::Float, "0.99", "rmsprop smoothing constant, in [0, 1)", {}},
      {"optim.centered", VT::Bool, "false", "rmsprop: normalise by the centred second moment", {}},
      {"optim.implementation", VT::String, R"("auto")",
       "auto = fused kernel where LibTorch has one (sgd, adam, adamw), else the per-parameter loop",
       {"auto", "fused", "for_loop"}},

      {"data.num_workers", VT::Int, "2", "loader threads (>= 0; 0 = load on the main thread)", {}},
      {"data.prefetch", VT::Int, "4", "batches queued ahead (>= 1)", {}},
      {"data.shuffle", VT::Bool, "true", "shuffle the training order every epoch (seeded)", {}},
      {"data.val_from_train", VT::Bool, "true",
       "without [data.val], build the \"val\" split from the [data.train] component", {}},
      {"data.on_bad_sample", VT::String, R"("fail")",
       "a sample that fails to load: fail (error naming plugin, index, file) or skip it (counted per epoch)",
       {"fail", "skip"}},

      {"checkpoint.strategy", VT::String, R"("epoch")",
       "when to save: every `every` epochs, every `every` optimizer steps, or never", {"epoch", "steps", "no"}},
      {"checkpoint.every", VT::Int, "1", "save interval in units of `strategy` (>= 1)", {}},
      {"checkpoint.save_last", VT::Bool, "true", "keep checkpoints/last.pt current at every save (the resume point)", {}},
      {"checkpoint.keep_last", VT::Int, "0",
       "also keep the K most recent numbered checkpoints (step-NNNNNNNN.pt); 0 = none", {}},
      {"checkpoint.save_top_k", VT::Int, "1",
       "keep the K best checkpoints by `monitor` (best.pt is the best, best-2.pt ...); 0 = none", {}},
      {"checkpoint.load_best_at_end", VT::Bool, "false",
       "after training, load the best checkpoint's weights (final evaluation and export use them)", {}},
      {"checkpoint.monitor", VT::String, R"("val/loss")",
       "metric that decides the best checkpoint (\"val/loss\", \"val/accuracy\", ...)", {}},
      {"checkpoint.mode", VT::String, R"("min")", "whether lower or higher `monitor` is better",
       {"min", "max"}},

      {"early_stopping.patience", VT::Int, "0",
       "stop after this many evaluations without improvement of `monitor`; 0 = off", {}},
      {"early_stopping.monitor", VT::String, R"("val/loss")", "the evaluated value early stopping watches", {}},
      {"early_stopping.mode", VT::String, R"("min")", "whether lower or higher `monitor` is better", {"min", "max"}},
      {"early_stopping.min_delta", VT::Float, "0.0", "smallest change of `monitor` that counts as an improvement (>= 0)", {}},
      {"early_stopping.check_finite", VT::Bool, "true", "stop at once when `monitor` becomes NaN or infinite", {}},

      {"amp.precision", VT::String, R"("fp32")",
       "fp32 | fp16 (autocast + dynamic grad scaler) | bf16 (autocast)", {"fp32", "fp16", "bf16"}},
      {"amp.init_scale", VT::Float, "65536.0", "fp16 grad scaler: initial scale", {}},
      {"amp.growth_factor", VT::Float, "2.0", "fp16 grad scaler: scale growth after growth_interval clean steps", {}},
      {"amp.backoff_factor", VT::Float, "0.5", "fp16 grad scaler: scale backoff on inf/NaN gradients", {}},
      {"amp.growth_interval", VT::Int, "2000", "fp16 grad scaler: clean steps before the scale grows", {}},

      {"schedule.name", VT::String, R"("constant")", "learning-rate schedule (time in optimizer steps)",
       {"constant", "step", "multistep", "exponential", "linear", "cosine", "one_cycle", "reduce_on_plateau"}},
      {"schedule.warmup_steps", VT::Int, "0", "linear, cosine: steps of linear warmup", {}},
      {"schedule.warmup_start_factor", VT::Float, "0.0", "linear, cosine: warmup starts at this x lr", {}},
      {"schedule.min_lr", VT::Float, "0.0", "linear, cosine: final lr; reduce_on_plateau: lower bound", {}},
      {"schedule.max_lr", VT::Float, "0.0", "one_cycle: peak lr; 0 = optim.lr", {}},
      {"schedule.pct_start", VT::Float, "0.3", "one_cycle: fraction of steps raising the lr", {}},
      {"schedule.anneal_strategy", VT::String, R"("cos")", "one_cycle: annealing shape", {"cos", "linear"}},
      {"schedule.three_phase", VT::Bool, "false", "one_cycle: symmetric rise and fall, then annihilation", {}},
      {"schedule.div_factor", VT::Float, "25.0", "one_cycle: initial lr = max_lr / div_factor", {}},
      {"schedule.final_div_factor", VT::Float, "1e4", "one_cycle: final lr = initial lr / final_div_factor", {}},
      {"schedule.cycle_momentum", VT::Bool, "true", "one_cycle: cycle SGD momentum / Adam(W) beta1", {}},
      {"schedule.base_momentum", VT::Float, "0.85", "one_cycle: momentum at the lr peak", {}},
      {"schedule.max_momentum", VT::Float, "0.95", "one_cycle: momentum at start and end", {}},
      {"schedule.step_size", VT::Int, "0", "step: decay every step_size optimizer steps (required by step)", {}},
      {"schedule.gamma", VT::Float, "0.1", "step, multistep, exponential: decay factor", {}},
      {"schedule.milestones", VT::IntArray, "[]", "multistep: optimizer steps at which to decay", {}},
      {"schedule.mode", VT::String, R"("min")", "reduce_on_plateau: whether lower or higher is better", {"min", "max"}},
      {"schedule.factor", VT::Float, "0.1", "reduce_on_plateau: new lr = lr x factor", {}},
      {"schedule.patience", VT::Int, "10", "reduce_on_plateau: evaluations without improvement tolerated", {}},
      {"schedule.threshold", VT::Float, "1e-4", "reduce_on_plateau: smallest change that counts", {}},
      {"schedule.threshold_mode", VT::String, R"("rel")", "reduce_on_plateau: threshold relative or absolute",
       {"rel", "abs"}},
      {"schedule.cooldown", VT::Int, "0", "reduce_on_plateau: evaluations to wait after a reduction", {}},
      {"schedule.eps", VT::Float, "1e-8", "reduce_on_plateau: reductions smaller than this are skipped", {}},
      {"schedule.monitor", VT::String, R"("val/loss")", "reduce_on_plateau: the evaluated value it watches", {}},

      {"progress.mode", VT::String, R"("auto")",
       "auto = bar on a terminal, lines otherwise", {"auto", "bar", "lines", "off"}},
      {"progress.every_seconds", VT::Float, "10.0", "interval of \"lines\" mode (> 0)", {}},

      {"plots.enabled", VT::Bool, "true",
       "draw plots/*.png (loss, each metric, lr; per step and per epoch) after every evaluation", {}},

      {"dist.backend", VT::String, R"("auto")", "collective backend: auto = nccl on CUDA, gloo on CPU",
       {"auto", "gloo", "nccl"}},
      {"dist.timeout_s", VT::Float, "300.0",
       "rendezvous and collective timeout in seconds (> 0); a lost rank fails the others after this", {}},
      {"dist.bucket_mb", VT::Float, "25.0", "gradient all-reduce bucket size in MiB (> 0)", {}},
      {"dist.find_unused_parameters", VT::Bool, "false",
       "allow parameters without a gradient in a step (walks the autograd graph every step)", {}},
      {"dist.broadcast_buffers", VT::Bool, "true",
       "copy rank 0's buffers (BatchNorm statistics) to every rank before each training forward", {}},
      {"dist.overlap", VT::Bool, "true",
       "all-reduce gradient buckets during backward; false: the same buckets after backward (benchmarks)", {}},
      {"dist.sync_batchnorm", VT::Bool, "false",
       "not supported: true is refused (LibTorch has no SyncBatchNorm; docs/distributed.md)", {}},

      {"plugins.dirs", VT::StringArray, "[]",
       "extra plugin directories, searched before the built-in one", {}},
  };
}

bool is_bare_key(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-';
  });
}

[[noreturn]] void plugin_key_error(std::string_view component_id, std::string_view key,
                                   const std::string& problem) {
  throw PluginLoadError("component '" + std::string(component_id) + "' declares config key '" +
                        std::string(key) + "' " + problem +
                        ". The plugin must fix its tp_config_key_t table (rule PLG-6); "
                        "until then it cannot be loaded.");
}

}  // namespace

const std::vector<KeySpec>& host_key_schema() {
  static const std::vector<KeySpec> schema = make_host_schema();
  return schema;
}

const KeySpec* find_host_key(std::string_view path) {
  for (const KeySpec& spec : host_key_schema()) {
    if (spec.path == path) return &spec;
  }
  return nullptr;
}

const std::vector<ComponentSlot>& component_slots() {
  static const std::vector<ComponentSlot> slots = {
      {"model", true, false, "org.torchhost.small_cnn"},
      {"loss", true, false, "org.torchhost.cross_entropy"},
      {"data.train", true, false, "org.torchhost.shapes"},
      {"data.val", false, false, "org.torchhost.shapes"},
      {"metrics", false, true, "org.torchhost.accuracy"},
      {"callbacks", false, true, "org.example.csv_logger"},
  };
  return slots;
}

const ComponentSlot* find_component_slot(std::string_view path) {
  for (const ComponentSlot& slot : component_slots()) {
    if (slot.path == path) return &slot;
  }
  return nullptr;
}

std::string env_mirror_name(std::string_view key_path) {
  std::string name = "TP_";
  for (char ch : key_path) {
    name += ch == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return name;
}

std::string_view value_type_phrase(ValueType type) {
  switch (type) {
    case VT::Bool: return "a boolean";
    case VT::Int: return "an integer";
    case VT::Float: return "a float";
    case VT::String: return "a string";
    case VT::IntArray: return "an array of integers";
    case VT::FloatArray: return "an array of floats";
    case VT::StringArray: return "an array of strings";
  }
  return "a value";
}

bool value_type_from_abi(int32_t tp_cfg_type, ValueType* out_type) {
  switch (tp_cfg_type) {
    case TP_CFG_BOOL: *out_type = VT::Bool; return true;
    case TP_CFG_INT: *out_type = VT::Int; return true;
    case TP_CFG_FLOAT: *out_type = VT::Float; return true;
    case TP_CFG_STRING:
    case TP_CFG_PATH: *out_type = VT::String; return true;  // a path is a string the host resolves
    case TP_CFG_INT_ARRAY: *out_type = VT::IntArray; return true;
    case TP_CFG_FLOAT_ARRAY: *out_type = VT::FloatArray; return true;
    case TP_CFG_STRING_ARRAY: *out_type = VT::StringArray; return true;
    default: return false;
  }
}

std::vector<KeySpec> plugin_schema(const tp_config_key_t* keys, uint32_t count,
                                   std::string_view component_id) {
  std::vector<KeySpec> schema;
  if (count == 0) return schema;
  const std::string id(component_id);
  if (keys == nullptr) {
    throw PluginLoadError("component '" + id + "' declares " + std::to_string(count) +
                          " config keys but a NULL key array. The plugin must fix its "
                          "descriptor (rule PLG-6); until then it cannot be loaded.");
  }
  // PLG-2: entries are read with the producer's stride into a zeroed copy, so a plugin built
  // against a longer tp_config_key_t still works; fields past `default_value` are optional.
  const std::size_t stride = keys[0].struct_size;
  const std::size_t minimum = offsetof(tp_config_key_t, default_value) + sizeof(const char*);
  if (stride < minimum) {
    throw PluginLoadError("component '" + id + "' declares config keys with struct_size " +
                          std::to_string(stride) + ", smaller than the " +
                          std::to_string(minimum) + " bytes of ABI 1.0. Set struct_size = "
                          "sizeof(tp_config_key_t) in every entry (rule PLG-6).");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(keys);
  std::set<std::string, std::less<>> seen;
  for (uint32_t i = 0; i < count; ++i) {
    tp_config_key_t key{};
    std::memcpy(&key, bytes + i * stride, std::min(stride, sizeof key));
    const std::string name = key.name != nullptr ? key.name : "";
    const std::string label = name.empty() ? "#" + std::to_string(i) : name;
    if (key.struct_size != stride) {
      plugin_key_error(id, label, "with struct_size " + std::to_string(key.struct_size) +
                                      " while entry #0 has " + std::to_string(stride));
    }
    if (!is_bare_key(name)) {
      plugin_key_error(id, label, "with an empty or invalid name (use snake_case letters, digits "
                                  "and '_')");
    }
    if (name == kComponentKey) {
      plugin_key_error(id, name, "but `component` is reserved: it names the component id");
    }
    if (!seen.insert(name).second) plugin_key_error(id, name, "twice");

    KeySpec spec{name, VT::Bool, "", "", {}};
    if (!value_type_from_abi(key.type, &spec.type)) {
      plugin_key_error(id, name, "with unknown type " + std::to_string(key.type) +
                                     " (expected one of the TP_CFG_* constants)");
    }
    spec.is_path = key.type == TP_CFG_PATH;
    if (stride >= offsetof(tp_config_key_t, help) + sizeof(const char*) && key.help != nullptr) {
      spec.help = key.help;
    }
    if (key.default_value != nullptr) {
      spec.default_literal = key.default_value;
      toml::table scratch;
      std::string error;
      if (!parse_value_into(scratch, "v", spec.default_literal, "default", &error)) {
        plugin_key_error(id, name, "with default '" + spec.default_literal +
                                       "', which is not a TOML value (" + error +
                                       "); strings need quotes, e.g. \"\\\"relu\\\"\"");
      }
      if (!matches_type(*scratch.get("v"), spec.type)) {
        plugin_key_error(id, name, "as " + std::string(value_type_phrase(spec.type)) +
                                       " but its default '" + spec.default_literal + "' is " +
                                       describe_node(*scratch.get("v")));
      }
    }
    schema.push_back(std::move(spec));
  }
  return schema;
}

}  // namespace tp
