// The subcommands. Each returns the process exit code and throws tp::Error for failures.
#pragma once

#include "cli.h"

namespace tp::cli {

/// `host train`: trains, writes the run directory, prints where the outputs are.
int run_train(const Options& options);
/// `host eval`: evaluates a checkpoint on the validation split; prints and writes metrics.
int run_eval(const Options& options);
/// `host export`: a checkpoint's model weights as safetensors.
int run_export(const Options& options);
/// `host plugins list|check`.
int run_plugins(const Options& options);
/// `host plot RUN_DIR`: redraws RUN_DIR/plots/*.png from RUN_DIR/history.jsonl, prints each path.
int run_plot(const Options& options);
/// `host profile`: the model's size, FLOPs/MACs and inference latency per device and precision;
/// prints a table and writes profile.json (docs/profiling.md).
int run_profile(const Options& options);

}  // namespace tp::cli
