// The `host` command line: subcommands and their options (Boost.Program_options).
//   host [train] --config run.toml [--set key=value]... [--plugin-dir DIR]... [--output-dir DIR]
//                [--resume auto|PATH]
//   host eval --config run.toml [--checkpoint best|last|PATH] [--weights live|ema] [--set ...] [--plugin-dir DIR]...
//             [--output-dir DIR]
//   host export --checkpoint PATH [--weights live|ema] --format safetensors --output FILE
//   host plugins list [--verbose] [--config run.toml] [--plugin-dir DIR]...
//   host plugins check FILE.so [--config run.toml] [--set key=value]... [--index N]... [--epoch E]
//   host plot RUN_DIR
//   host profile --config run.toml [--devices cpu,cuda] [--batch-size N] [--precisions fp32,bf16]
//                [--iterations N] [--warmup N] [--output PATH]
//   host --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] <command> ...
//        (the launcher, launcher.h; it runs each rank as `host <command> ...`)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp::cli {

/// Everything the command line said.
struct Options {
  std::string command = "train";   ///< "train" | "eval" | "export" | "plugins" | "plot" | "profile"
  std::string action;              ///< plugins: "list" | "check"
  std::string config;              ///< --config
  std::vector<std::string> sets;   ///< --set key.path=value (in order)
  std::vector<std::string> plugin_dirs;
  std::string output_dir;          ///< --output-dir (overrides run.output_dir)
  std::string checkpoint = "best"; ///< eval: best | last | PATH
  std::string resume;              ///< train: "" (fresh) | auto | PATH
  std::string format = "safetensors"; ///< export: output format
  std::string weights = "live";       ///< eval, export: live | ema (the checkpoint's averaged weights)
  std::string output;              ///< export: output file; profile: profile.json path
  std::string file;                ///< plugins check FILE
  std::vector<uint64_t> indices;   ///< plugins check: --index, extra sample indices to read
  uint64_t epoch = 0;              ///< plugins check: --epoch, the epoch samples are read in
  std::string run_dir;             ///< plot RUN_DIR
  std::string devices;             ///< profile: comma-separated devices ("" = run.device)
  std::string precisions = "fp32"; ///< profile: comma-separated fp32 | bf16 | fp16
  int64_t batch_size = 0;          ///< profile: 0 = train.batch_size
  int64_t iterations = 50;         ///< profile: timed forward passes per device and precision
  int64_t warmup = 10;             ///< profile: untimed forward passes before them
  bool verbose = false;
  bool allow_insecure_plugin_dir = false; ///< --allow-insecure-plugin-dir
  bool help = false;
  std::string help_text;           ///< filled when help is true
};

/// Parses argv. Throws tp::ConfigError (exit 2) with the usage line for bad input.
Options parse(int argc, char** argv);

}  // namespace tp::cli
