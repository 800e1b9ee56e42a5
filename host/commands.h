// The subcommands. Each returns the process exit code and throws tp::Error for failures.
#pragma once

#include "cli.h"
#include "launcher.h"

namespace tp::cli {

/// `host train`: trains, writes the run directory, prints where the outputs are.
int run_train(const Options& options);
/// `host eval`: evaluates a checkpoint on the validation split; prints and writes metrics.
int run_eval(const Options& options);
/// `host predict`: one row per sample of a split, in dataset order, with the chosen model outputs
/// (docs/predict.md); exact under data-parallel runs, streamed to disk.
int run_predict(const Options& options);
/// `host sweep`: trains the product of --grid values one run after another (resumable) and writes
/// the comparison (docs/experiments.md). With `launch` (`host --nproc-per-node N sweep ...`) each
/// cell trains under the launcher, data-parallel; several nodes are refused.
int run_sweep(const Options& options, const LaunchOptions* launch = nullptr);
/// `host compare RUN_DIR...`: a table of the runs' differing config values, metrics, time and
/// memory, as comparison.csv / comparison.md and overlay plots (docs/experiments.md).
int run_compare(const Options& options);
/// `host verify`: the run's configuration and plugins through short checks (data, loss and
/// metric contracts, gradients, accumulation, resume, distributed, overfit); prints a table and
/// returns kExitVerifyFailed when a check fails (docs/verify.md).
int run_verify(const Options& options);
/// `host tune lr|batch-size`: the learning-rate range test, or the largest micro-batch that fits
/// the device; each trains throwaway child runs under <run dir>/tune/ (docs/tune.md).
int run_tune(const Options& options);
/// `host export`: a checkpoint's model weights as safetensors.
int run_export(const Options& options);
/// `host --version`: prints host_version_text() (tp/framework/engine/version_text.h).
int print_version();
/// `host plugins list|check`.
int run_plugins(const Options& options);
/// `host plot RUN_DIR`: redraws RUN_DIR/plots/*.png from RUN_DIR/history.jsonl, prints each path.
int run_plot(const Options& options);
/// `host shards write`: an image_folder split's files and labels as WebDataset tar shards, in
/// index order (docs/datasets.md, "Sharded data"); prints the `shards` pattern that reads them.
int run_shards(const Options& options);
/// `host mlflow-sync RUN_DIR`: sends what the run's MLflow server lacks (docs/experiment_tracking.md).
int run_mlflow_sync(const Options& options);
/// `host profile`: the model's size, FLOPs/MACs and inference latency per device and precision;
/// prints a table and writes profile.json (docs/profiling.md).
int run_profile(const Options& options);

}  // namespace tp::cli
