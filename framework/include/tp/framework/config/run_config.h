// The typed, validated configuration of one run (docs/architecture.md, run step 2).
//
// Every host key is declared exactly once, as one row of the key table (config/host_keys.h) that
// names the member below it fills, with its type, default, help and limits; configs/reference.toml
// lists them all and a test keeps the two in step (docs/config_keys.md: how to add a key).
// load_run_config() parses the file, applies environment mirrors and --set overrides, validates,
// fills defaults and returns this immutable value. The sections have no initializers: loading
// writes every member from the table, so a default lives in one place. Component tables
// ([model], [loss], [data.train], [[metrics]], ...) are kept as TOML and validated later against
// the schema the plugin declares (plugin tables are only known once plugins are loaded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "tp/framework/config/choices.h"
#include "tp/framework/config/value_kinds.h"
#include "tp/framework/optim/scheduler_options.h"

namespace tp {

/// One component table: `component = "<id>"` plus the component's own keys.
struct ComponentConfig {
  std::string component; ///< reverse-DNS component id
  std::string key_path;  ///< where it came from: "model", "data.train", "metrics[1]"
  toml::table options;   ///< the table without `component`; validated against the plugin schema
  bool operator==(const ComponentConfig&) const = default; ///< field-wise
};

struct RunSection {
  std::string name;       ///< run name, shown in logs
  std::string output_dir; ///< run directory; created if missing
  int64_t seed;           ///< seeds model init, shuffling and augmentation
  std::string device;     ///< "auto" | "cpu" | "cuda" | "cuda:N" (a device: the spelling checked when loaded)
  bool deterministic;     ///< deterministic algorithms only; cuDNN benchmark off
  int64_t threads;        ///< intra-op threads; 0 = physical cores minus loader threads (min 1)
  bool channels_last;     ///< model and 4-D inputs in channels-last memory format
  bool cudnn_benchmark;   ///< cuDNN autotuning per shape (never with deterministic)
  bool tf32;              ///< TF32 tensor cores for fp32 matmul/convolution on CUDA
  CudaGraphMode cuda_graphs; ///< capture the training step in a CUDA graph (docs/cuda_graphs.md)
  SyncDebugMode sync_debug;  ///< a host sync inside a non-logging CUDA step warns or fails
  std::vector<int64_t> trace_steps; ///< [] or [first, last]: optimizer steps recorded as a Chrome trace
  bool operator==(const RunSection&) const = default; ///< field-wise
};

struct TrainSection {
  int64_t epochs;
  int64_t batch_size;      ///< per process
  int64_t log_every_steps; ///< loss is read (a device sync) only on these steps
  bool drop_last;          ///< drop the short last training batch
  int64_t grad_accum_steps; ///< micro-batches per optimizer step (>= 1)
  double max_grad_norm;     ///< clip the global gradient norm to this; 0 = off
  double grad_norm_type;    ///< the norm of max_grad_norm (2 = Euclidean; inf allowed)
  double clip_value;        ///< clamp every gradient element to [-v, v]; 0 = off
  double agc_clip_factor;   ///< adaptive gradient clipping (timm's --clip-mode agc): unit-wise factor; 0 = off
  std::vector<std::string> agc_ignore; ///< globs of parameter names AGC leaves alone (timm leaves the head)
  NanPolicy nan_policy; ///< what a non-finite training loss does
  OomPolicy on_oom;     ///< what running out of device memory in a step does
  int64_t max_steps;        ///< > 0: the run's optimizer steps (epochs follow from it)
  std::string max_time;     ///< training-time budget "[D:]HH:MM:SS" as written (messages); "" = none
  double max_time_seconds;  ///< train.max_time in seconds, parsed when loaded; 0 = none
  int64_t overfit_batches;  ///< > 0: train and validate on the first N training batches, unshuffled
  int64_t limit_batches;    ///< > 0: each epoch trains on the first N batches of its (shuffled) order, per rank
  bool fast_dev_run;        ///< one training step and one evaluation batch; nothing written
  std::string init_weights; ///< initial weights file ("" = the model's own init); see checkpoint/initial_weights.h
  std::vector<std::string> init_weights_ignore; ///< globs of names init_weights leaves out (a new head)
  std::string init_weights_prefix; ///< only init_weights' names under it are read, without it ("model.")
  bool operator==(const TrainSection&) const = default; ///< field-wise
};

struct AmpSection {
  Precision precision;   ///< "fp32" | "fp16" | "bf16", parsed when loaded
  double init_scale;     ///< fp16 grad scaler: initial scale
  double growth_factor;
  double backoff_factor;
  int64_t growth_interval;
  bool operator==(const AmpSection&) const = default; ///< field-wise
};

struct EvalSection {
  int64_t batch_size;   ///< 0 = train.batch_size
  IntervalStrategy strategy; ///< when to evaluate
  int64_t every;        ///< interval in units of `strategy`
  int64_t sanity_batches; ///< batches evaluated before the first training step (0 = no sanity check)
  int64_t limit_batches;  ///< > 0: each evaluation covers the first N batches of each rank's shard
  bool operator==(const EvalSection&) const = default; ///< field-wise
};

/// One [[optim.param_groups]] rule: parameters whose name matches `pattern` (a shell glob, `*`
/// also crosses dots) get these overrides. The first matching rule wins.
struct ParamGroupRule {
  std::string pattern;
  std::optional<double> lr;           ///< absent = optim.lr
  std::optional<double> weight_decay; ///< absent = the default rule (optim.weight_decay on dim >= 2, else 0)
  bool freeze = false;                ///< no gradient, no update, no weight decay (until unfreeze_at_epoch)
  int64_t unfreeze_at_epoch = 0;      ///< 1-based epoch from which frozen parameters train; 0 = never
  bool freeze_bn_stats = false;       ///< the BatchNorm layers the pattern matches stay in eval mode (a frozen teacher)
  bool operator==(const ParamGroupRule&) const = default; ///< field-wise
};

struct OptimSection {
  std::string name; ///< "sgd" | "adam" | "adamw" | "rmsprop" | "lamb" | "lion" | "lars"
  double lr;          ///< set from lr_base by apply_lr_base (config/lr_base.h) when that is > 0
  double lr_base;     ///< timm's --lr-base: lr for a global batch of lr_base_size; 0 = off (lr as given)
  int64_t lr_base_size;      ///< the global batch lr_base is given for (timm's --lr-base-size)
  std::string lr_base_scale; ///< "auto" | "linear" | "sqrt": how lr follows the global batch (timm's --lr-base-scale)
  double weight_decay; ///< never applied to tensors with dim < 2 (biases, norms) unless a param group sets it
  double momentum;     ///< sgd, rmsprop, lars
  double dampening;    ///< sgd, lars: the momentum buffer takes (1 - dampening) x the gradient
  bool nesterov;       ///< sgd, lars
  std::vector<double> betas; ///< adam, adamw, lamb, lion: two values
  double eps;          ///< adam, adamw, rmsprop, lamb, lars (the trust ratio's denominator)
  bool amsgrad;        ///< adam, adamw
  double alpha;        ///< rmsprop
  bool centered;       ///< rmsprop
  bool bias_correction;      ///< lamb: divide the moments by 1 - beta^step (timm's Lamb bias_correction)
  bool grad_averaging;       ///< lamb: the first moment takes (1 - beta1) x grad, else the whole grad
  double lamb_max_grad_norm; ///< lamb: its own global-norm clip inside the step (timm's max_grad_norm); 0 = off
  bool trust_clip;           ///< lamb: clamp the trust ratio at 1 (LAMBC); lars: clamp trust ratio / lr at 1 (LARC)
  bool always_adapt;         ///< lamb, lars: trust ratio on parameters without weight decay too
  double trust_coeff;        ///< lars: the trust coefficient eta of trust_coeff x ||w|| / (||g|| + wd x ||w|| + eps)
  bool caution;              ///< lion: cautious update, only where sign(update) agrees with the gradient (timm's clion)
  std::string implementation; ///< "auto" | "fused" | "for_loop"
  double layer_decay;  ///< lr x layer_decay^(deepest - depth) by the model's declared depths; 1 = off
  std::vector<ParamGroupRule> param_groups; ///< [[optim.param_groups]], in file order
  bool operator==(const OptimSection&) const = default; ///< field-wise
};

struct DataSection {
  int64_t num_workers;  ///< loader threads
  int64_t prefetch;     ///< batches queued ahead
  bool device_prefetch; ///< CUDA: each batch goes to the device on a copy stream, overlapping the step before
  bool shuffle;         ///< training order shuffled per epoch (seeded)
  bool val_from_train;  ///< without [data.val], build "val" from the [data.train] component
  bool test_from_train; ///< without [data.test], build "test" from the [data.train] component
  BadSamplePolicy on_bad_sample; ///< a sample that fails to load
  double max_bad_fraction;       ///< "skip": an epoch skipping more than this share of its samples stops the run; >= 1 = no limit
  double sample_timeout_s;   ///< seconds one sample may load on a loader thread before it counts as bad; 0: no limit
  int64_t group_window;      ///< a dataset stored in groups (tar shards): samples shuffled within this many groups
  DecodeMode decode;         ///< where image files are decoded: the loader threads or the device (nvJPEG)
  double decode_cpu_share;   ///< decode on the device: the share of each batch the loader thread decodes on the CPU meanwhile
  ComponentConfig train;
  std::optional<ComponentConfig> val;
  std::optional<ComponentConfig> test; ///< [data.test]: read only by `host eval/predict --split test`
  std::vector<ComponentConfig> batch_transforms; ///< [[data.batch_transforms]]: training batches, in order
  bool operator==(const DataSection&) const = default; ///< field-wise
};

struct CheckpointSection {
  IntervalStrategy strategy; ///< when to save periodically
  int64_t every;        ///< interval in units of `strategy`
  bool save_last;       ///< last.pt, the resume point
  int64_t keep_last;    ///< numbered checkpoints kept (step-NNNNNNNN.pt)
  int64_t save_top_k;   ///< best checkpoints kept (best.pt, best-2.pt, ...)
  bool load_best_at_end;
  std::string monitor;  ///< "val/loss", "val/accuracy", ...
  std::string mode;     ///< "min" | "max"
  bool operator==(const CheckpointSection&) const = default; ///< field-wise
};

/// [early_stopping]: stop when `monitor` has not improved for `patience` evaluations.
struct EarlyStoppingSection {
  int64_t patience; ///< 0 = no patience rule (the thresholds may still stop)
  std::string monitor;
  std::string mode; ///< "min" | "max"
  double min_delta;
  bool check_finite;
  double stop_below;  ///< stop at once when `monitor` falls below it; -inf = never
  double stop_above;  ///< stop at once when `monitor` rises above it; inf = never
  int64_t min_epochs; ///< no stop (but a non-finite `monitor`'s) before this many epochs are trained
  bool operator==(const EarlyStoppingSection&) const = default; ///< field-wise
};

struct PlotsSection {
  bool enabled;         ///< redraw plots/*.png after evaluations
  double min_interval_s; ///< at most one redraw per this many seconds (the end of fit always redraws); 0 = every evaluation
  bool operator==(const PlotsSection&) const = default; ///< field-wise
};

/// [logging.mlflow]: the run tracked on an MLflow server by rank 0 (docs/experiment_tracking.md).
/// The credentials come from the environment, as MLflow's own client takes them.
struct MlflowSection {
  bool enabled;                  ///< track this run on the server
  std::string tracking_uri;      ///< http(s)://host[:port][/path]; "" = $MLFLOW_TRACKING_URI
  std::string experiment;        ///< experiment name, created when missing
  std::string run_name;          ///< "" = run.name
  std::vector<std::string> tags; ///< "key=value" entries, set on the run
  std::string log_checkpoints;   ///< "none" | "best": also upload checkpoints/best.pt at the end
  std::string parent_run_id;     ///< the MLflow run this one is a child of (host sweep sets it)
  double timeout_seconds;        ///< one request's limit
  double flush_seconds;          ///< how often the sender reads new history records
  double finish_timeout_seconds; ///< how long the end of the run waits for what is left to send
  bool operator==(const MlflowSection&) const = default; ///< field-wise
};

/// [logging]: extra outputs of rank 0 beside history.jsonl (docs/logging.md).
struct LoggingSection {
  bool tensorboard;        ///< write <run dir>/tensorboard/events.out.tfevents.* (scalars, config text, hparams)
  bool tensorboard_images; ///< also the plots/*.png after each redraw, as image summaries
  MlflowSection mlflow;    ///< [logging.mlflow]
  bool operator==(const LoggingSection&) const = default; ///< field-wise
};

struct ProgressSection {
  std::string mode;     ///< "auto" | "bar" | "lines" | "off"
  double every_seconds; ///< throttle of "lines" mode
  bool operator==(const ProgressSection&) const = default; ///< field-wise
};

/// [ema]: an exponential moving average of the weights (docs/weight_averaging.md), PyTorch's
/// AveragedModel + get_ema_multi_avg_fn: the first update copies, then avg = lerp(avg, w, 1 - decay).
struct EmaSection {
  bool enabled;         ///< keep and evaluate the average
  double decay;         ///< in (0, 1)
  bool warmup;          ///< decay_n = min(decay, 1 - (1 + n)^(-2/3)), n = updates averaged so far (timm ModelEmaV3)
  int64_t every_steps;  ///< update after every N-th optimizer step (>= 1)
  bool on_cpu;          ///< keep the average in host memory (saves device memory, one copy per update)
  AverageBuffers buffers; ///< floating-point buffers: averaged (use_buffers=True) or copied
  bool operator==(const EmaSection&) const = default; ///< field-wise
};

/// [swa]: stochastic weight averaging (AveragedModel + get_swa_multi_avg_fn, SWALR, update_bn).
struct SwaSection {
  bool enabled;
  int64_t start_epoch;         ///< 1-based: the first epoch averaged (its end) and run at the SWA lr schedule
  std::vector<double> lr;      ///< SWALR swa_lr: one value or one per parameter group
  int64_t anneal_epochs;       ///< SWALR anneal_epochs (>= 0)
  AnnealShape anneal_strategy; ///< SWALR's annealing shape
  bool update_bn;              ///< recompute BatchNorm statistics over the training set at the end
  bool operator==(const SwaSection&) const = default; ///< field-wise
};

/// [dist]: data-parallel training over c10d (docs/distributed.md). Read only when the process
/// was launched with WORLD_SIZE > 1 (torchrun, SLURM or `host --nproc-per-node`).
struct DistSection {
  std::string backend;         ///< "auto" (nccl on CUDA, gloo on CPU) | "gloo" | "nccl"
  double timeout_s;            ///< collective and rendezvous timeout (> 0)
  double bucket_mb;            ///< gradient all-reduce bucket size in MiB (> 0)
  bool find_unused_parameters; ///< tolerate parameters that get no gradient in a step (a graph walk per step)
  bool broadcast_buffers;      ///< copy rank 0's buffers (BatchNorm statistics) to all ranks before each forward
  BatchNormSync bn_stats; ///< BatchNorm statistics before each evaluation and save
  bool overlap;                ///< all-reduce buckets from autograd hooks during backward (false: after it)
  double prepare_timeout_s = 3600.0; ///< how long the ranks wait for the datasets' prepare on local rank 0 (> 0)
  bool operator==(const DistSection&) const = default; ///< field-wise
};

/// How much of a run a command reads from its config. kRun: every required table ([model],
/// [loss], [data.train]), as train, eval and the others need. kData: the data tables alone, for
/// `host shards write`, which reads [data.*] and nothing else: [model] and [loss] may then be
/// absent, and RunConfig::model / loss are left with an empty component id.
enum class ConfigScope { kRun, kData };

/// The whole run. Immutable once loaded.
struct RunConfig {
  RunSection run;
  TrainSection train;
  EvalSection eval;
  OptimSection optim;
  DataSection data;
  CheckpointSection checkpoint;
  ProgressSection progress;
  AmpSection amp;
  SchedulerOptions schedule; ///< [schedule], read straight into the scheduler's options
  EarlyStoppingSection early_stopping;
  PlotsSection plots;
  LoggingSection logging; ///< [logging]
  std::vector<std::string> plugin_dirs; ///< [plugins] dirs
  ComponentConfig model;
  bool activation_checkpointing = false; ///< [model] activation_checkpointing: recompute declared blocks in backward
  bool freeze_bn_stats = false;          ///< [model] freeze_bn_stats: BatchNorm layers stay in eval mode while training
  ComponentConfig loss;
  std::vector<ComponentConfig> metrics;
  std::vector<ComponentConfig> callbacks;

  toml::table resolved; ///< the full table after overrides and defaults (written to config.toml)
  std::string source;   ///< the config file path ("" when built from text)
  DistSection dist;     ///< [dist]
  EmaSection ema;       ///< [ema]
  SwaSection swa;       ///< [swa]

  /// Field-wise equality, `source` included (compare the members to ignore it).
  bool operator==(const RunConfig&) const = default;
};

}  // namespace tp
