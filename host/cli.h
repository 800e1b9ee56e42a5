// The `host` command line: subcommands and their options (Boost.Program_options).
//   host [train] --config run.toml [--set key=value]... [--plugin-dir DIR]... [--output-dir DIR]
//                [--resume auto|PATH]
//   host eval --config run.toml [--checkpoint best|last|PATH] [--weights live|ema|swa] [--split val|test] [--set ...]
//             [--plugin-dir DIR]... [--output-dir DIR]
//   host predict --config run.toml [--checkpoint best|last|PATH] [--weights live|ema|swa]
//                [--split val|test|train | --images DIR|LIST|IMAGE] [--output FILE] [--format csv|jsonl|npy|png]
//                [--outputs NAME,...] [--tta hflip] [--set ...]
//   host sweep --config run.toml --grid KEY=V1,V2,... [--grid ...]... [--set ...] [--output-dir DIR]
//              [--metric NAME] [--mode min|max] [--keep-going]
//   host compare RUN_DIR... [--metric NAME] [--mode min|max] [--output-dir DIR]
//   host export --checkpoint PATH [--weights live|ema|swa] --format safetensors --output FILE
//   host plugins list [--verbose] [--config run.toml] [--plugin-dir DIR]...
//   host plugins check FILE.so [--config run.toml] [--set key=value]... [--index N]... [--epoch E]
//                      [--samples N|all]
//   host plot RUN_DIR
//   host verify --config run.toml [--checks data,loss,...] [--steps N] [--set ...] [--plugin-dir DIR]...
//   host tune lr --config run.toml [--min-lr 1e-7] [--max-lr 10] [--steps 100] [--set ...] [--output-dir DIR]
//   host tune batch-size --config run.toml [--headroom 0.1] [--max N] [--keep-global-batch]
//                        [--memory-limit SIZE] [--set ...] [--output-dir DIR]
//   host profile --config run.toml [--devices cpu,cuda] [--batch-size N] [--precisions fp32,bf16]
//                [--iterations N] [--warmup N] [--output PATH]
//   host --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] <command> ...
//        (the launcher, launcher.h; it runs each rank as `host <command> ...`)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp::cli {

/// The checks of `host verify`, in the order it runs them: in-process first (seconds), then the
/// training checks, child processes (docs/verify.md).
inline constexpr std::array<const char*, 8> kVerifyChecks = {
    "data", "loss", "metric", "gradients", "accumulation", "resume", "distributed", "overfit"};

/// Everything the command line said.
struct Options {
  std::string command = "train";   ///< "train" | "eval" | "predict" | "export" | "plugins" | "plot" | "mlflow-sync" | "profile" |
                                   ///< "sweep" | "compare" | "verify" | "tune" | "shards"
  std::string action;              ///< plugins: "list" | "check"; tune: "lr" | "batch-size"; shards: "write"
  std::string config;              ///< --config
  std::vector<std::string> sets;   ///< --set key.path=value (in order)
  std::vector<std::string> plugin_dirs;
  std::string output_dir;          ///< --output-dir (overrides run.output_dir)
  std::string checkpoint = "best"; ///< eval, predict: best | last | PATH
  std::string resume;              ///< train: "" (fresh) | auto | PATH
  bool new_run = false;            ///< train: --new-run, set an earlier run's files aside and start afresh
  bool mlflow = false;             ///< eval: --mlflow, log the metrics to the run's MLflow run too
  std::string format;              ///< export: safetensors (default); predict: csv (default) | jsonl | npy
  std::string weights;                ///< eval, export, predict: live | ema | swa; "": the monitored (weights_choice.h)
  std::string output;              ///< export: output file; profile: profile.json path; predict: predictions file
  std::string split;               ///< eval: val | test (default val); predict: val | test | train (default val);
                                   ///< shards write: train | val | test (default train)
  std::string out;                 ///< shards write: --out DIR, where the shards go
  std::string shard_size = "256MB"; ///< shards write: --shard-size, the largest shard (a byte size)
  std::string prefix;              ///< shards write: --prefix, the shards' file name start ("" = the split)
  std::string seed;                ///< shards write: --seed, the sample order's shuffle ("" = run.seed)
  bool keep_order = false;         ///< shards write: --keep-order, the listing's order instead of shuffled
  std::string outputs;             ///< predict: comma-separated model output names ("" = every output)
  std::string tta;                 ///< predict: "" | "hflip" (average with the horizontally flipped input)
  std::string images;              ///< predict: --images DIR|LIST|IMAGE, new files predicted without labels ("" = a split)
  std::vector<std::string> grid;   ///< sweep: --grid KEY=V1,V2,... (in order; the product is run)
  std::string metric;              ///< sweep, compare: the metric to rank by ("" = the run's checkpoint.monitor)
  std::string mode;                ///< sweep, compare: --mode min | max, the metric's better direction ("" = as the runs decide)
  bool keep_going = false;         ///< sweep: --keep-going, train every cell even when one fails
  std::vector<std::string> run_dirs; ///< compare RUN_DIR...
  std::string file;                ///< plugins check FILE
  std::vector<uint64_t> indices;   ///< plugins check: --index, extra sample indices to read
  uint64_t epoch = 0;              ///< plugins check: --epoch, the epoch samples are read in
  std::string samples;             ///< plugins check: --samples N|all ("": the default indices)
  std::string run_dir;             ///< plot RUN_DIR, mlflow-sync RUN_DIR
  std::string devices;             ///< profile: comma-separated devices ("" = run.device)
  std::string precisions = "fp32"; ///< profile: comma-separated fp32 | bf16 | fp16
  int64_t batch_size = 0;          ///< profile: 0 = train.batch_size
  int64_t iterations = 50;         ///< profile: timed forward passes per device and precision
  int64_t warmup = 10;             ///< profile: untimed forward passes before them
  std::string checks;              ///< verify: --checks as given ("" = all)
  std::vector<std::string> verify_checks; ///< verify: the checks to run, validated, in kVerifyChecks order
  int64_t steps = 4;               ///< verify: optimizer steps of each training check (--steps)
  double min_lr = 1e-7;            ///< tune lr: --min-lr, the sweep's first lr (its --steps default to 100)
  double max_lr = 10.0;            ///< tune lr: --max-lr, the sweep's last lr
  double headroom = 0.1;           ///< tune batch-size: --headroom, the share of the memory limit kept free
  int64_t max_batch = 0;           ///< tune batch-size: --max, the largest micro-batch tried (0 = no cap)
  bool keep_global_batch = false;  ///< tune batch-size: --keep-global-batch
  std::string memory_limit;        ///< tune batch-size: --memory-limit SIZE ("" = the device's memory; CPU needs it)
  bool verbose = false;
  bool allow_insecure_plugin_dir = false; ///< --allow-insecure-plugin-dir
  bool help = false;
  bool version = false;            ///< --version: print the build and exit
  std::string help_text;           ///< filled when help is true
};

/// Parses argv. Throws tp::ConfigError (exit 2) with the usage line for bad input.
Options parse(int argc, char** argv);

/// The items of a comma-separated option value ("a,b,,c" -> a, b, c): empty items are dropped.
std::vector<std::string> split_list(const std::string& text);

}  // namespace tp::cli
