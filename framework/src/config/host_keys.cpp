// The host key table: one row per key (docs/config_keys.md). The binding machinery is in
// key_binding.h; what derives from the rows is listed in host_keys.h.
#include "tp/framework/config/host_keys.h"

#include <vector>

#include "config/key_binding.h"

namespace tp {
namespace {

using detail::above;
using detail::above_and_below;
using detail::at_least;
using detail::at_least_and_below;
using detail::key;
using detail::refused_key;
using detail::typed_key;
using detail::with_parsed;
using VT = ValueType;

// The key [section] member fills RunConfig::section.member: one name for both, so a row cannot
// fill another key's member.
#define TP_HOST_KEY(section, member, ...) \
  key<&RunConfig::section, &decltype(RunConfig::section)::member>(#section "." #member, __VA_ARGS__)
// A key of [logging.mlflow] (LoggingSection::mlflow).
#define TP_MLFLOW_KEY(member, ...)                                                       \
  key<&RunConfig::logging, &LoggingSection::mlflow, &MlflowSection::member>("logging.mlflow." #member, \
                                                                            __VA_ARGS__)
// A String key of a value kind whose member keeps the text and whose `parsed` member, beside it,
// gets `parse` of it (train.max_time -> train.max_time_seconds).
#define TP_PARSED_KEY(section, member, parsed, parse, ...)                                       \
  with_parsed<parse, &RunConfig::section, &decltype(RunConfig::section)::parsed>(TP_HOST_KEY( \
      section, member, __VA_ARGS__))
// A Float key that fills a "one value or per group" list (SchedulerOptions::min_lr) with its value.
#define TP_PER_GROUP_KEY(section, member, ...)                                      \
  typed_key<VT::Float, &RunConfig::section, &decltype(RunConfig::section)::member>( \
      #section "." #member, __VA_ARGS__)

std::vector<HostKey> make_host_keys() {
  // One row per key, in the order of configs/reference.toml, which repeats the defaults (a test
  // compares them). Rows: member, default (a TOML literal), help, then {.choices, .limit, .is_path, .kind};
  // an enum member (choices.h) brings its own choices.
  return {
      TP_HOST_KEY(run, name, R"("run")", "run name, shown in logs"),
      TP_HOST_KEY(run, output_dir, R"("runs/run")",
          "run directory (checkpoints, config.toml, logs); created if missing"),
      TP_HOST_KEY(run, seed, "42", "seeds model init, shuffling and augmentation"),
      TP_HOST_KEY(run, device, R"("auto")",
          "auto = cuda when available, else cpu",
          {.kind = &device_kind()}),
      TP_HOST_KEY(run, deterministic, "false",
          "deterministic algorithms only (errors on ops without one); cuDNN benchmark off"),
      TP_HOST_KEY(run, threads, "0",
          "intra-op threads (< 1024); 0 = physical cores minus loader threads (min 1)",
          {.limit = at_least_and_below(0, 1024)}),
      TP_HOST_KEY(run, channels_last, "false",
          "channels-last memory format for the model and 4-D inputs (faster convolutions on CUDA and oneDNN)"),
      TP_HOST_KEY(run, cudnn_benchmark, "false",
          "let cuDNN time convolution algorithms for each new shape (faster for fixed shapes; off when deterministic)"),
      TP_HOST_KEY(run, tf32, "false",
          "allow TF32 tensor cores for fp32 matmul and convolutions (CUDA, Ampere+)"),
      TP_HOST_KEY(run, cuda_graphs, R"("off")",
          "capture the whole training step in a CUDA graph after a few eager steps and replay it (same numbers, "
          "far fewer launches): on (refused with the reason where it cannot apply), auto (where it applies and "
          "timing shows it faster), off"),
      TP_HOST_KEY(run, sync_debug, R"("off")",
          "CUDA: a call that makes the host wait for the device inside a training step (logging steps aside) "
          "warns or fails, naming where (torch.cuda.set_sync_debug_mode)"),
      TP_HOST_KEY(run, trace_steps, "[]",
          "[first, last]: record these optimizer steps (1-based) with the PyTorch profiler and write a Chrome "
          "trace of the operators and, on CUDA, every kernel to <run>/trace/rank0.json; [] = off"),

      TP_HOST_KEY(train, epochs, "10", "number of passes over the training set (>= 1)", {.limit = at_least(1)}),
      TP_HOST_KEY(train, batch_size, "32", "samples per step, per process (>= 1)", {.limit = at_least(1)}),
      TP_HOST_KEY(train, log_every_steps, "50",
          "read the loss (a device sync) and log every N steps (>= 1)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(train, drop_last, "true", "drop the short last training batch"),
      TP_HOST_KEY(train, grad_accum_steps, "1",
          "micro-batches per optimizer step; the loss is normalised over the whole window (>= 1)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(train, max_grad_norm, "0.0",
          "clip the global gradient norm to this, once per optimizer step after unscaling; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(train, grad_norm_type, "2.0", "norm used by max_grad_norm (2 = Euclidean, inf = max)"),
      TP_HOST_KEY(train, clip_value, "0.0",
          "clamp every gradient element to [-v, v]; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(train, agc_clip_factor, "0.0",
          "adaptive gradient clipping (timm's --clip-mode agc --clip-grad X): each output unit's gradient norm is "
          "held to this x its weight norm (at least 1e-3), once per optimizer step after unscaling; not with "
          "max_grad_norm or clip_value; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(train, agc_ignore, "[]",
          "shell globs (`*` crosses dots) of parameter names adaptive gradient clipping leaves alone; timm's "
          "train.py leaves the classifier head: [\"fc.*\"] for the zoo's ResNet"),
      TP_HOST_KEY(train, nan_policy, R"("stop")",
          "non-finite training loss: stop (error naming step, batch, lr) or skip the optimizer step"),
      TP_HOST_KEY(train, on_oom, R"("fail")",
          "out of memory in a step: fail (report naming the batch size and peak memory) or split the micro-batch in "
          "halves from then on, the global batch unchanged"),
      TP_HOST_KEY(train, max_steps, "0",
          "stop after this many optimizer steps; overrides epochs (the schedule counts it); 0 = off",
          {.limit = at_least(0)}),
      TP_PARSED_KEY(train, max_time, max_time_seconds, &try_parse_duration, R"("")",
          "stop at the first step boundary after this much training time, \"HH:MM:SS\" (or \"D:HH:MM:SS\"); saves, "
          "exits 0; a resumed run continues the budget; \"\" = off",
          {.kind = &duration_kind()}),
      TP_HOST_KEY(train, overfit_batches, "0",
          "sanity check: train and validate on the first N training batches, unshuffled; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(train, limit_batches, "0",
          "train each epoch on the first N batches of its shuffled order, per rank (Lightning's integer "
          "limit_train_batches); the schedule counts the shorter epochs; 0 = every batch",
          {.limit = at_least(0)}),
      TP_HOST_KEY(train, fast_dev_run, "false",
          "sanity check: one training step and one evaluation batch, no checkpoints or history"),
      TP_HOST_KEY(train, init_weights, R"("")",
          "start from these weights: a host checkpoint (its model entry), a torch.save(model.state_dict()) file or a "
          ".safetensors file; names and shapes must match the model exactly; \"\" = the model's own init; ignored "
          "by --resume",
          {.is_path = true}),
      TP_HOST_KEY(train, init_weights_ignore, "[]",
          "shell globs (`*` crosses dots) of names train.init_weights leaves out on both sides, e.g. [\"fc.*\"] for a "
          "head with another class count: those keep the model's own init; the rest stays strict"),
      TP_HOST_KEY(train, init_weights_prefix, R"("")",
          "read only the names of train.init_weights that begin with this, without it: \"model.\" for a Lightning "
          "module whose network is self.model, \"module.\" for a DDP module's state_dict; the rest of the file is "
          "left unread; \"\" = the names as they are"),

      TP_HOST_KEY(eval, batch_size, "0", "evaluation batch size; 0 = train.batch_size", {.limit = at_least(0)}),
      TP_HOST_KEY(eval, strategy, R"("epoch")",
          "when to evaluate: every `every` epochs, every `every` optimizer steps, or never"),
      TP_HOST_KEY(eval, every, "1",
          "evaluation interval in units of `strategy` (>= 1)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(eval, sanity_batches, "2",
          "evaluate this many batches before the first training step, so a broken evaluation (a metric's "
          "options, the monitored names) fails at once, not after an epoch; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(eval, limit_batches, "0",
          "evaluate the first N batches of each rank's shard of the split (Lightning's integer limit_val_batches): "
          "faster, but the values no longer cover the split; 0 = every batch",
          {.limit = at_least(0)}),

      TP_HOST_KEY(optim, name, R"("adamw")", "optimizer", {.choices = {"sgd", "adam", "adamw", "rmsprop", "lamb", "lion", "lars"}}),
      TP_HOST_KEY(optim, lr, "1e-3", "learning rate (> 0)", {.limit = above(0)}),
      TP_HOST_KEY(optim, lr_base, "0.0",
          "timm's --lr-base: the lr for a global batch of lr_base_size, scaled to this run's (batch_size x ranks x "
          "grad_accum_steps) in place of optim.lr; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(optim, lr_base_size, "256", "the global batch optim.lr_base is given for (timm's --lr-base-size)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(optim, lr_base_scale, R"("auto")",
          "lr = lr_base x ratio (linear) or x sqrt(ratio) (sqrt); auto = sqrt for adam, adamw and lamb, as timm",
          {.choices = {"auto", "linear", "sqrt"}}),
      TP_HOST_KEY(optim, weight_decay, "0.01",
          "weight decay (>= 0): decoupled for adamw and lion, added to the gradient (L2) for sgd, adam, rmsprop, "
          "added to the update inside the trust ratio for lamb and lars; only on tensors with dim >= 2 unless a param "
          "group sets it (lamb, lars: a parameter without decay gets no trust ratio either)",
          {.limit = at_least(0)}),
      TP_HOST_KEY(optim, momentum, "0.9",
          "sgd, rmsprop and lars momentum, in [0, 1)",
          {.limit = at_least_and_below(0, 1)}),
      TP_HOST_KEY(optim, dampening, "0.0",
          "sgd, lars: the momentum buffer takes (1 - dampening) x the gradient, in [0, 1)",
          {.limit = at_least_and_below(0, 1)}),
      TP_HOST_KEY(optim, nesterov, "false", "sgd, lars Nesterov momentum (needs momentum > 0, dampening = 0)"),
      TP_HOST_KEY(optim, betas, "[0.9, 0.999]",
          "adam, adamw, lamb, lion betas, two values in [0, 1) (timm's Lion defaults to [0.9, 0.99])"),
      TP_HOST_KEY(optim, eps, "1e-8",
          "adam, adamw, rmsprop, lamb, lars epsilon (> 0; timm's Lamb defaults to 1e-6, Lars to 1e-8)",
          {.limit = above(0)}),
      TP_HOST_KEY(optim, amsgrad, "false", "adam, adamw: AMSGrad variant"),
      TP_HOST_KEY(optim, alpha, "0.99",
          "rmsprop smoothing constant, in [0, 1)",
          {.limit = at_least_and_below(0, 1)}),
      TP_HOST_KEY(optim, centered, "false", "rmsprop: normalise by the centred second moment"),
      TP_HOST_KEY(optim, bias_correction, "true", "lamb: divide the moments by 1 - beta^step (timm's Lamb)"),
      TP_HOST_KEY(optim, grad_averaging, "true",
          "lamb: the first moment takes (1 - beta1) x grad; false = the whole grad (timm's Lamb)"),
      TP_HOST_KEY(optim, lamb_max_grad_norm, "1.0",
          "lamb: divide the gradients by max(1, global norm / this) inside the step (timm's Lamb max_grad_norm); "
          "after train.max_grad_norm's clip when both are set; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(optim, trust_clip, "false",
          "lamb: clamp the trust ratio ||w|| / ||update|| at 1 (timm's LAMBC); lars: clamp trust ratio / lr at 1 "
          "(timm's LARC)"),
      TP_HOST_KEY(optim, always_adapt, "false",
          "lamb, lars: apply the trust ratio to parameters without weight decay too (timm's Lamb, Lars)"),
      TP_HOST_KEY(optim, trust_coeff, "0.001",
          "lars: the trust coefficient eta, trust ratio = eta x ||w|| / (||g|| + weight_decay x ||w|| + eps) "
          "(timm's Lars trust_coeff; > 0)",
          {.limit = above(0)}),
      TP_HOST_KEY(optim, caution, "false",
          "lion: cautious update, kept only where its sign agrees with the gradient's (timm's clion)"),
      TP_HOST_KEY(optim, implementation, R"("auto")",
          "auto = fused kernel where LibTorch has one (sgd, adam, adamw), else the per-parameter loop",
          {.choices = {"auto", "fused", "for_loop"}}),
      TP_HOST_KEY(optim, layer_decay, "1.0",
          "layer-wise lr decay in (0, 1]: lr x layer_decay^(deepest - depth), depths declared by the model (timm's "
          "--layer-decay); 1.0 = off",
          {.limit = above(0)}),

      // The loader's own bound (data_loader.cpp, [0, 1024]) here, so a larger value is a config
      // error naming the key (security trial F15), not the loader's exit 1.
      TP_HOST_KEY(data, num_workers, "2",
          "loader threads (0 to 1024; 0 = load on the main thread)",
          {.limit = at_least_and_below(0, 1025)}),
      TP_HOST_KEY(data, prefetch, "4", "batches queued ahead (>= 1)", {.limit = at_least(1)}),
      TP_HOST_KEY(data, device_prefetch, "true",
          "CUDA: copy each batch to the device on a stream of its own, so the copy overlaps the step before "
          "(false: on the step's stream, after it)"),
      TP_HOST_KEY(data, shuffle, "true", "shuffle the training order every epoch (seeded)"),
      TP_HOST_KEY(data, val_from_train, "true",
          "without [data.val], build the \"val\" split from the [data.train] component"),
      TP_HOST_KEY(data, test_from_train, "true",
          "without [data.test], `host eval/predict --split test` build the \"test\" split from the [data.train] "
          "component (a dataset that serves one, ABI 1.5)"),
      TP_HOST_KEY(data, on_bad_sample, R"("fail")",
          "a sample that fails to load: fail (error naming plugin, index, file) or skip it (counted per epoch)"),
      TP_HOST_KEY(data, max_bad_fraction, "0.1",
          "under on_bad_sample = \"skip\": a training epoch whose skipped share of samples (over the ranks) is above "
          "this stops the run, naming the first bad files (>= 0; 1 = no limit)",
          {.limit = at_least(0)}),
      TP_HOST_KEY(data, sample_timeout_s, "600.0",
          "seconds one sample may take to load on a loader thread (a read stuck on a hung network file system) "
          "before it counts as a bad sample under data.on_bad_sample (>= 0; 0 = wait forever; needs num_workers >= 1)",
          {.limit = at_least(0)}),
      TP_HOST_KEY(data, group_window, "4",
          "a dataset stored in groups (tar shards, plugin ABI 1.10): the training order shuffles the groups, "
          "then the samples within each window of this many consecutive groups (>= 1; about this many shards "
          "are read at a time, so their bytes sit in the page cache: window x shard size)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(data, decode, R"("cpu")",
          "where image files are decoded: cpu (the loader threads), gpu (the device: nvJPEG, then crop, resize, "
          "flip and normalise in one kernel; refused naming why where it cannot apply) or auto (the device where "
          "it can, else the CPU; runtime.toml says which and why)"),
      TP_HOST_KEY(data, decode_cpu_share, "0.0",
          "with the decode on the device: the share of each batch (its last rows) the loader thread decodes on "
          "the CPU path while the device decodes the rest, in [0, 1); where the GPU's JPEG engines are the limit, "
          "CPU and engines together feed more (docs/datasets.md, \"Decoding on the GPU\")",
          {.limit = at_least_and_below(0, 1)}),

      TP_HOST_KEY(checkpoint, strategy, R"("epoch")",
          "when to save: every `every` epochs, every `every` optimizer steps, or never"),
      TP_HOST_KEY(checkpoint, every, "1",
          "save interval in units of `strategy` (>= 1)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(checkpoint, save_last, "true",
          "keep checkpoints/last.pt current at every save (the resume point)"),
      TP_HOST_KEY(checkpoint, keep_last, "0",
          "also keep the K most recent numbered checkpoints (step-NNNNNNNN.pt); 0 = none",
          {.limit = at_least(0)}),
      TP_HOST_KEY(checkpoint, save_top_k, "1",
          "keep the K best checkpoints by `monitor` as best-step-NNNNNNNN.pt, ranked in best.tsv; best.pt is the best; 0 = none",
          {.limit = at_least(0)}),
      TP_HOST_KEY(checkpoint, load_best_at_end, "false",
          "after training, load the best checkpoint's weights (final evaluation and export use them)"),
      TP_HOST_KEY(checkpoint, monitor, R"("val/loss")",
          "metric that decides the best checkpoint (\"val/loss\", \"val/accuracy\", ...)"),
      TP_HOST_KEY(checkpoint, mode, R"("auto")",
          "whether lower or higher `monitor` is better; auto = by its name (loss, error: min; accuracy, f1, iou, map: max)",
          {.choices = {"auto", "min", "max"}}),

      TP_HOST_KEY(early_stopping, patience, "0",
          "stop after this many evaluations without improvement of `monitor`; 0 = off",
          {.limit = at_least(0)}),
      TP_HOST_KEY(early_stopping, monitor, R"("val/loss")", "the evaluated value early stopping watches"),
      TP_HOST_KEY(early_stopping, mode, R"("auto")",
          "whether lower or higher `monitor` is better; auto = by its name, as checkpoint.mode",
          {.choices = {"auto", "min", "max"}}),
      TP_HOST_KEY(early_stopping, min_delta, "0.0",
          "smallest change of `monitor` that counts as an improvement (>= 0)",
          {.limit = at_least(0)}),
      TP_HOST_KEY(early_stopping, check_finite, "true", "stop at once when `monitor` becomes NaN or infinite"),
      TP_HOST_KEY(early_stopping, stop_below, "-inf",
          "stop at once when `monitor` falls below this value (Lightning's stopping_threshold in mode min, "
          "divergence_threshold in mode max); -inf = never"),
      TP_HOST_KEY(early_stopping, stop_above, "inf",
          "stop at once when `monitor` rises above this value (Lightning's stopping_threshold in mode max, "
          "divergence_threshold in mode min); inf = never"),
      TP_HOST_KEY(early_stopping, min_epochs, "0",
          "hold back every stop of early stopping but a non-finite `monitor`'s until this many epochs are "
          "trained; a stop once called for then happens (Lightning's Trainer min_epochs)",
          {.limit = at_least(0)}),

      // A Precision member: the precision kind comes with the type.
      TP_HOST_KEY(amp, precision, R"("fp32")", "fp32 | fp16 (autocast + dynamic grad scaler) | bf16 (autocast)"),
      TP_HOST_KEY(amp, init_scale, "65536.0", "fp16 grad scaler: initial scale", {.limit = above(0)}),
      TP_HOST_KEY(amp, growth_factor, "2.0",
          "fp16 grad scaler: scale growth after growth_interval clean steps",
          {.limit = above(1)}),
      TP_HOST_KEY(amp, backoff_factor, "0.5",
          "fp16 grad scaler: scale backoff on inf/NaN gradients",
          {.limit = above_and_below(0, 1)}),
      TP_HOST_KEY(amp, growth_interval, "2000",
          "fp16 grad scaler: clean steps before the scale grows",
          {.limit = at_least(1)}),

      TP_HOST_KEY(schedule, name, R"("constant")",
          "learning-rate schedule (time: schedule.interval)",
          {.choices = {"constant", "step", "multistep", "exponential", "linear", "cosine", "polynomial",
                       "one_cycle", "reduce_on_plateau", "range_test"}}),
      TP_HOST_KEY(schedule, interval, R"("step")",
          "when the lr changes: every optimizer step, or once per epoch (time, step_size, milestones in epochs)",
          {.choices = {"step", "epoch"}}),
      TP_HOST_KEY(schedule, warmup_steps, "0", "linear, cosine, polynomial: optimizer steps of linear warmup (interval \"step\")"),
      TP_HOST_KEY(schedule, warmup_epochs, "0", "linear, cosine, polynomial: epochs of linear warmup (timm --warmup-epochs)",
          {.limit = at_least(0)}),
      TP_HOST_KEY(schedule, warmup_start_factor, "0.0", "linear, cosine, polynomial: warmup starts at this x lr"),
      TP_HOST_KEY(schedule, warmup_lr, "0.0",
          "linear, cosine, polynomial: warmup starts at this lr (timm --warmup-lr); 0 = warmup_start_factor x lr",
          {.limit = at_least(0)}),
      TP_HOST_KEY(schedule, warmup_prefix, "true",
          "linear, cosine, polynomial: decay after the warmup (true) or under it, as timm's default (false)"),
      TP_HOST_KEY(schedule, cooldown_epochs, "0", "linear, cosine, polynomial: final epochs held at min_lr (timm --cooldown-epochs)",
          {.limit = at_least(0)}),
      TP_PER_GROUP_KEY(schedule, min_lr, "0.0",
          "linear, cosine: final lr; reduce_on_plateau: lower bound; range_test: first lr"),
      TP_PER_GROUP_KEY(schedule, max_lr, "0.0", "one_cycle: peak lr; range_test: last lr; 0 = optim.lr"),
      TP_HOST_KEY(schedule, power, "1.0", "polynomial: the decay's exponent (PolynomialLR; torchvision's segmentation 0.9)"),
      TP_HOST_KEY(schedule, total_iters, "0",
          "polynomial: optimizer steps (or epochs) of the decay from its start; 0 = until the run's end",
          {.limit = at_least(0)}),
      TP_HOST_KEY(schedule, pct_start, "0.3", "one_cycle: fraction of steps raising the lr"),
      TP_HOST_KEY(schedule, anneal_strategy, R"("cos")",
          "one_cycle: annealing shape",
          {.choices = {"cos", "linear"}}),
      TP_HOST_KEY(schedule, three_phase, "false", "one_cycle: symmetric rise and fall, then annihilation"),
      TP_HOST_KEY(schedule, div_factor, "25.0", "one_cycle: initial lr = max_lr / div_factor"),
      TP_HOST_KEY(schedule, final_div_factor, "1e4", "one_cycle: final lr = initial lr / final_div_factor"),
      TP_HOST_KEY(schedule, cycle_momentum, "true", "one_cycle: cycle SGD momentum / Adam(W) beta1"),
      TP_PER_GROUP_KEY(schedule, base_momentum, "0.85", "one_cycle: momentum at the lr peak"),
      TP_PER_GROUP_KEY(schedule, max_momentum, "0.95", "one_cycle: momentum at start and end"),
      TP_HOST_KEY(schedule, step_size, "0", "step: decay every step_size optimizer steps or epochs (interval; required by step)"),
      TP_HOST_KEY(schedule, gamma, "0.1", "step, multistep, exponential: decay factor"),
      TP_HOST_KEY(schedule, milestones, "[]", "multistep: optimizer steps or epochs (interval) at which to decay"),
      TP_HOST_KEY(schedule, mode, R"("auto")",
          "reduce_on_plateau: whether lower or higher is better; auto = by the monitor's name, as checkpoint.mode",
          {.choices = {"auto", "min", "max"}}),
      TP_HOST_KEY(schedule, factor, "0.1", "reduce_on_plateau: new lr = lr x factor"),
      TP_HOST_KEY(schedule, patience, "10", "reduce_on_plateau: evaluations without improvement tolerated"),
      TP_HOST_KEY(schedule, threshold, "1e-4", "reduce_on_plateau: smallest change that counts"),
      TP_HOST_KEY(schedule, threshold_mode, R"("rel")",
          "reduce_on_plateau: threshold relative or absolute",
          {.choices = {"rel", "abs"}}),
      TP_HOST_KEY(schedule, cooldown, "0", "reduce_on_plateau: evaluations to wait after a reduction"),
      TP_HOST_KEY(schedule, eps, "1e-8", "reduce_on_plateau: reductions smaller than this are skipped"),
      TP_HOST_KEY(schedule, monitor, R"("val/loss")", "reduce_on_plateau: the evaluated value it watches"),

      TP_HOST_KEY(progress, mode, R"("auto")",
          "auto = bar on a terminal, lines otherwise",
          {.choices = {"auto", "bar", "lines", "off"}}),
      TP_HOST_KEY(progress, every_seconds, "10.0", "interval of \"lines\" mode (> 0)", {.limit = above(0)}),

      TP_HOST_KEY(plots, enabled, "true",
          "draw plots/*.png (loss, each metric, lr; per step and per epoch) after evaluations"),
      TP_HOST_KEY(plots, min_interval_s, "10.0",
          "redraw at most once per this many seconds (>= 0; 0 = after every evaluation); the end of training always "
          "redraws",
          {.limit = at_least(0)}),

      TP_HOST_KEY(logging, tensorboard, "false",
          "write TensorBoard events to <run dir>/tensorboard (every history value, the config, hparams)"),
      TP_HOST_KEY(logging, tensorboard_images, "false",
          "with logging.tensorboard: add the plots/*.png as images after each redraw"),
      TP_MLFLOW_KEY(enabled, "false", "track the run on an MLflow server (rank 0; docs/experiment_tracking.md)"),
      TP_MLFLOW_KEY(tracking_uri, R"("")", "http(s)://host[:port][/path] of the server; \"\" = $MLFLOW_TRACKING_URI"),
      TP_MLFLOW_KEY(experiment, R"("torchhost")", "experiment name (created when missing)"),
      TP_MLFLOW_KEY(run_name, R"("")", "the MLflow run's name; \"\" = run.name"),
      TP_MLFLOW_KEY(tags, "[]", "tags set on the run, each \"key=value\""),
      TP_MLFLOW_KEY(log_checkpoints, R"("none")", "best = also upload checkpoints/best.pt at the end",
          {.choices = {"none", "best"}}),
      TP_MLFLOW_KEY(parent_run_id, R"("")", "the MLflow run this one is a child of (host sweep sets it per cell)"),
      TP_MLFLOW_KEY(timeout_seconds, "30.0", "one request's time limit in seconds (> 0)", {.limit = above(0)}),
      TP_MLFLOW_KEY(flush_seconds, "5.0", "how often new history records are sent, in seconds (> 0)",
          {.limit = above(0)}),
      TP_MLFLOW_KEY(finish_timeout_seconds, "60.0",
          "how long the end of the run waits for what is left to send, in seconds (>= 0)", {.limit = at_least(0)}),

      TP_HOST_KEY(dist, backend, R"("auto")",
          "collective backend: auto = nccl on CUDA, gloo on CPU",
          {.choices = {"auto", "gloo", "nccl"}}),
      TP_HOST_KEY(dist, timeout_s, "300.0",
          "rendezvous and collective timeout in seconds (> 0); a lost rank fails the others after this"),
      TP_HOST_KEY(dist, prepare_timeout_s, "3600.0",
          "seconds the ranks wait for the datasets' prepare on local rank 0 of each node (> 0): a first "
          "download or listing of a large dataset takes longer than dist.timeout_s"),
      TP_HOST_KEY(dist, bucket_mb, "25.0", "gradient all-reduce bucket size in MiB (> 0)"),
      TP_HOST_KEY(dist, find_unused_parameters, "false",
          "allow parameters without a gradient in a step (walks the autograd graph every step)"),
      TP_HOST_KEY(dist, broadcast_buffers, "true",
          "copy rank 0's buffers (BatchNorm statistics) to every rank before each training forward"),
      TP_HOST_KEY(dist, bn_stats, R"("broadcast")",
          "BatchNorm running statistics before every evaluation and save: broadcast = rank 0's, reduce = the mean "
          "over ranks (timm's distribute_bn)"),
      TP_HOST_KEY(dist, overlap, "true",
          "all-reduce gradient buckets during backward; false: the same buckets after backward (benchmarks)"),
      // Refused when true (validate_host_table says why); false is accepted for portable configs.
      refused_key("dist.sync_batchnorm", "false",
          "not supported: true is refused (LibTorch has no SyncBatchNorm; docs/distributed.md)"),

      TP_HOST_KEY(ema, enabled, "false",
          "keep an exponential moving average of the weights, evaluated as val_ema/* after every evaluation"),
      TP_HOST_KEY(ema, decay, "0.9999", "avg = decay x avg + (1 - decay) x weights, in (0, 1)",
          {.limit = above_and_below(0, 1)}),
      TP_HOST_KEY(ema, warmup, "false",
          "decay_n = min(decay, 1 - (1 + n)^(-2/3)), n = updates averaged so far (timm's EMA warmup)"),
      TP_HOST_KEY(ema, every_steps, "1", "update the average after every N-th optimizer step (>= 1)",
          {.limit = at_least(1)}),
      TP_HOST_KEY(ema, on_cpu, "false",
          "keep the average in host memory: saves device memory, costs a device-to-host copy per update"),
      TP_HOST_KEY(ema, buffers, R"("average")",
          "floating-point buffers (BatchNorm statistics): average them, or copy the live ones"),

      TP_HOST_KEY(swa, enabled, "false",
          "stochastic weight averaging: an equal average of the weights at the end of each epoch from start_epoch"),
      TP_HOST_KEY(swa, start_epoch, "1",
          "first averaged epoch (1-based); from it on SWALR replaces the schedule",
          {.limit = at_least(1)}),
      TP_PER_GROUP_KEY(swa, lr, "0.0", "SWALR swa_lr, the lr the SWA epochs anneal to (> 0 when swa.enabled)"),
      TP_HOST_KEY(swa, anneal_epochs, "10", "SWALR: epochs from the schedule's lr to swa.lr (>= 0)",
          {.limit = at_least(0)}),
      TP_HOST_KEY(swa, anneal_strategy, R"("cos")", "SWALR annealing shape"),
      TP_HOST_KEY(swa, update_bn, "true",
          "after training, recompute BatchNorm running statistics with the averaged weights over the training set"),

      // [plugins] dirs is RunConfig::plugin_dirs, a member of its own rather than a section.
      key<&RunConfig::plugin_dirs>("plugins.dirs", "[]",
          "extra plugin directories, searched before the built-in one"),
  };
}

#undef TP_PARSED_KEY
#undef TP_PER_GROUP_KEY
#undef TP_HOST_KEY

}  // namespace

const std::vector<HostKey>& host_keys() {
  static const std::vector<HostKey> keys = make_host_keys();
  return keys;
}

void read_host_keys(const toml::table& resolved, RunConfig& cfg) {
  for (const HostKey& key : host_keys()) {
    const toml::node* value = resolved.at_path(key.spec.path).node();
    if (key.read != nullptr && value != nullptr) key.read(*value, cfg);
    if (key.read_parsed != nullptr && value != nullptr) key.read_parsed(*value, cfg);
  }
}

}  // namespace tp
