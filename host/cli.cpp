#include "cli.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tp/framework/error.h"

namespace tp::cli {
namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: host [train] --config FILE [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]\n"
    "                    [--resume auto|PATH]\n"
    "       host eval --config FILE [--checkpoint best|last|PATH] [--weights live|ema] [--split val|test]\n"
    "                 [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]\n"
    "       host predict --config FILE [--checkpoint best|last|PATH] [--weights live|ema] [--split val|test|train]\n"
    "                    [--output FILE] [--format csv|jsonl|npy] [--outputs NAME,...] [--tta hflip] [--set ...]\n"
    "       host sweep --config FILE --grid KEY=V1,V2,... [--grid ...]... [--set KEY=VALUE]... [--output-dir DIR]\n"
    "                  [--metric NAME]\n"
    "       host compare RUN_DIR... [--metric NAME] [--output-dir DIR]\n"
    "       host export --checkpoint PATH [--weights live|ema] --format safetensors --output FILE\n"
    "       host plugins list [--verbose] [--config FILE] [--plugin-dir DIR]...\n"
    "       host plugins check FILE.so [--config FILE] [--set KEY=VALUE]... [--index N]... [--epoch E]\n"
    "       host plot RUN_DIR\n"
    "       host verify --config FILE [--checks data,loss,metric,gradients,accumulation,resume,distributed,overfit]\n"
    "                   [--steps N] [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]\n"
    "       host tune lr --config FILE [--min-lr 1e-7] [--max-lr 10] [--steps 100] [--set KEY=VALUE]...\n"
    "                    [--output-dir DIR]\n"
    "       host tune batch-size --config FILE [--headroom 0.1] [--max N] [--keep-global-batch] [--memory-limit SIZE]\n"
    "                            [--set KEY=VALUE]... [--output-dir DIR]\n"
    "       host profile --config FILE [--devices cpu,cuda] [--batch-size N] [--precisions fp32,bf16,fp16]\n"
    "                    [--iterations N] [--warmup N] [--output PATH]\n"
    "       host --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] train|eval|predict ...\n"
    "            data-parallel: N ranks on this node (docs/distributed.md); torchrun --no-python host ... also works\n";

po::options_description describe(Options& o) {
  po::options_description d("options");
  d.add_options()
      ("help,h", po::bool_switch(&o.help), "show this help")
      ("config,c", po::value(&o.config),
       "the run's TOML file; plugins check: the options of the components it names")
      ("set,s", po::value(&o.sets)->composing(),
       "override a key: --set optim.lr=3e-4 (TOML value syntax); plugins check without --config: a component "
       "option, --set size=8")
      ("plugin-dir,p", po::value(&o.plugin_dirs)->composing(), "extra plugin directory (highest precedence)")
      ("allow-insecure-plugin-dir", po::bool_switch(&o.allow_insecure_plugin_dir),
       "load plugins from files or directories others can write (refused by default: a plugin is code)")
      ("output-dir,o", po::value(&o.output_dir), "run directory (overrides run.output_dir)")
      ("checkpoint", po::value(&o.checkpoint),
       "eval, predict: best, last or a checkpoint path; export: the checkpoint")
      ("weights", po::value(&o.weights),
       "eval, export, predict: live (the trained weights, default) or ema (the checkpoint's averaged weights, [ema])")
      ("split", po::value(&o.split), "eval: val (default) or test; predict: val (default), test or train")
      ("format", po::value(&o.format), "export: output format (safetensors); predict: csv (default), jsonl or npy")
      ("output", po::value(&o.output),
       "export: output file; profile: where profile.json goes; predict: the predictions file "
       "(default: RUN_DIR/predictions_<split>_<checkpoint>.<format>)")
      ("outputs", po::value(&o.outputs), "predict: comma-separated model outputs to write (default: all)")
      ("tta", po::value(&o.tta), "predict: hflip averages each output with that of the horizontally flipped input")
      ("grid", po::value(&o.grid)->composing(),
       "sweep: KEY=V1,V2,... one axis of the grid (TOML values); repeat for more axes, the product is run")
      ("metric", po::value(&o.metric),
       "sweep, compare: the metric to compare (default: checkpoint.monitor of the runs, e.g. val/loss)")
      ("devices", po::value(&o.devices), "profile: comma-separated devices, e.g. cpu,cuda (default: run.device)")
      ("precisions", po::value(&o.precisions), "profile: comma-separated fp32, bf16, fp16 (default: fp32)")
      ("batch-size", po::value(&o.batch_size), "profile: samples per batch (default: train.batch_size)")
      ("iterations", po::value(&o.iterations), "profile: timed forward passes (default: 50)")
      ("warmup", po::value(&o.warmup), "profile: untimed forward passes first (default: 10)")
      ("index", po::value(&o.indices)->composing(),
       "plugins check: also read this sample index of each dataset split (besides first, last and random ones)")
      ("epoch", po::value(&o.epoch), "plugins check: the epoch datasets read their samples in (default: 0)")
      ("checks", po::value(&o.checks),
       "verify: comma-separated checks to run (default: all of data, loss, metric, gradients, accumulation, "
       "resume, distributed, overfit)")
      ("steps", po::value(&o.steps), "verify: optimizer steps of each training check (default: 4)")
      ("min-lr", po::value(&o.min_lr),
       "tune lr: the sweep's first lr (default: 1e-7); its --steps default to 100")
      ("max-lr", po::value(&o.max_lr), "tune lr: the sweep's last lr (default: 10)")
      ("headroom", po::value(&o.headroom), "tune batch-size: share of the memory limit kept free (default: 0.1)")
      ("max", po::value(&o.max_batch), "tune batch-size: the largest micro-batch to try (default: the training split)")
      ("keep-global-batch", po::bool_switch(&o.keep_global_batch),
       "tune batch-size: print the batch_size and grad_accum_steps that keep batch_size x grad_accum_steps")
      ("memory-limit", po::value(&o.memory_limit),
       "tune batch-size: the memory a step may use, e.g. 4GiB (default: the device's; required on CPU)")
      ("resume", po::value(&o.resume), "train: continue from `auto` (the run's last.pt, if any) or a checkpoint path")
      ("verbose,v", po::bool_switch(&o.verbose), "more detail (debug log, plugin schemas)");
  return d;
}

// --split and --format per command, before anything is loaded (a typo costs no plugin loading).
void check_split_and_format(Options& o) {
  if (o.command == "eval") {
    if (o.split.empty()) o.split = "val";
    if (o.split != "val" && o.split != "test")
      throw ConfigError("--split", "host eval --split must be val or test (got '" + o.split + "').");
  }
  if (o.command != "predict") return;
  if (o.split.empty()) o.split = "val";
  if (o.split != "val" && o.split != "test" && o.split != "train")
    throw ConfigError("--split", "host predict --split must be val, test or train (got '" + o.split + "').");
  if (o.format.empty()) o.format = "csv";
  if (o.format != "csv" && o.format != "jsonl" && o.format != "npy")
    throw ConfigError("--format", "host predict --format must be csv, jsonl or npy (got '" + o.format + "').");
  if (!o.tta.empty() && o.tta != "hflip")
    throw ConfigError("--tta", "host predict --tta must be hflip (got '" + o.tta + "').");
}

// --checks of `host verify`: known names only (a typo costs no plugin loading), run in
// kVerifyChecks order, each once.
void select_verify_checks(Options& o) {
  std::vector<std::string> asked;
  std::istringstream in(o.checks);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    if (std::find(kVerifyChecks.begin(), kVerifyChecks.end(), name) == kVerifyChecks.end()) {
      std::string known;
      for (const char* check : kVerifyChecks) known += std::string(known.empty() ? "" : ", ") + check;
      throw ConfigError("--checks", "host verify --checks: unknown check '" + name + "' (known: " + known + ").");
    }
    asked.push_back(name);
  }
  for (const char* check : kVerifyChecks)
    if (asked.empty() || std::find(asked.begin(), asked.end(), check) != asked.end())
      o.verify_checks.emplace_back(check);
  if (o.steps < 1)
    throw ConfigError("--steps", "host verify --steps must be at least 1 (got " + std::to_string(o.steps) + ").");
}

// `host tune lr|batch-size`: the action and the ranges of its options, before anything is loaded.
Options check_tune(Options o, const std::vector<std::string>& words, bool steps_given) {
  if (words.empty() || (words[0] != "lr" && words[0] != "batch-size"))
    throw ConfigError("", "host tune: say `lr` (the learning-rate range test) or `batch-size` (the largest micro-batch "
                          "that fits).\n" + std::string(kUsage));
  o.action = words[0];
  if (words.size() > 1) throw ConfigError("", "unexpected argument '" + words[1] + "'.\n" + std::string(kUsage));
  if (o.config.empty())
    throw ConfigError("", "host tune " + o.action + " needs --config FILE.\n" + std::string(kUsage));
  const auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return std::string(text);
  };
  if (o.action == "lr") {
    if (!steps_given) o.steps = 100;
    if (!(o.min_lr > 0 && std::isfinite(o.min_lr)))
      throw ConfigError("--min-lr", "host tune lr --min-lr must be a positive lr (got " + number(o.min_lr) + ").");
    if (!(o.max_lr > o.min_lr && std::isfinite(o.max_lr)))
      throw ConfigError("--max-lr", "host tune lr --max-lr must be above --min-lr (got " + number(o.max_lr) + " and " +
                                        number(o.min_lr) + "): the sweep rises from one to the other.");
    if (o.steps < 13)
      throw ConfigError("--steps", "host tune lr --steps must be at least 13 (got " + std::to_string(o.steps) +
                                       "): the suggestion skips the first 10 and the last point, and needs 2 between.");
  } else if (!(o.headroom >= 0 && o.headroom < 1) || o.max_batch < 0) {
    throw ConfigError(o.max_batch < 0 ? "--max" : "--headroom",
                      "host tune batch-size needs 0 <= --headroom < 1 (a share of the memory limit; got " +
                          number(o.headroom) + ") and --max >= 0 (0: no cap; got " +
                          std::to_string(o.max_batch) + ").");
  }
  return o;
}

}  // namespace

Options parse(int argc, char** argv) {
  Options o;
  po::options_description options = describe(o);
  po::options_description hidden;
  std::vector<std::string> words;
  hidden.add_options()("words", po::value(&words));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("words", -1);
  po::variables_map vm; // tune lr reads whether --steps was given (verify's default differs)
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError("", std::string("command line: ") + e.what() + ".\n" + kUsage);
  }
  std::ostringstream help;
  help << kUsage << "\n" << options;
  o.help_text = help.str();
  if (o.help) return o;
  if (!words.empty()) {
    o.command = words[0];
    words.erase(words.begin());
  }
  if (o.command == "plugins") {
    if (words.empty()) throw ConfigError("", "host plugins: say `list` or `check FILE.so`.\n" + std::string(kUsage));
    o.action = words[0];
    if (o.action == "check") {
      if (words.size() != 2) throw ConfigError("", "host plugins check takes exactly one FILE.so.\n" + std::string(kUsage));
      o.file = words[1];
    } else if (o.action != "list" || words.size() != 1) {
      throw ConfigError("", "host plugins: unknown action '" + o.action + "'.\n" + std::string(kUsage));
    }
    return o;
  }
  if (o.command == "tune") return check_tune(std::move(o), words, vm.count("steps") > 0);
  if (o.command == "plot") {
    if (words.size() != 1)
      throw ConfigError("", "host plot takes exactly one RUN_DIR (the directory a training run wrote).\n" +
                                std::string(kUsage));
    o.run_dir = words[0];
    return o;
  }
  if (o.command == "compare") {
    if (words.empty())
      throw ConfigError("", "host compare needs at least one RUN_DIR (directories training runs wrote).\n" +
                                std::string(kUsage));
    o.run_dirs = words;
    return o;
  }
  if (o.command == "export") {
    if (!words.empty() || o.output.empty() || o.checkpoint == "best")
      throw ConfigError("", "host export needs --checkpoint PATH and --output FILE.\n" + std::string(kUsage));
    return o;
  }
  if (o.command != "train" && o.command != "eval" && o.command != "predict" && o.command != "profile" &&
      o.command != "sweep" && o.command != "verify")
    throw ConfigError("", "unknown command '" + o.command +
                              "' (train, eval, predict, export, plugins, plot, profile, sweep, compare, verify, tune).\n" +
                              std::string(kUsage));
  if (o.command == "verify") select_verify_checks(o);
  check_split_and_format(o);
  if (o.command == "sweep" && o.grid.empty())
    throw ConfigError("--grid", "host sweep needs at least one --grid KEY=V1,V2,... (the values to try).\n" +
                                    std::string(kUsage));
  if (o.command == "profile" && (o.batch_size < 0 || o.iterations < 1 || o.warmup < 0))
    throw ConfigError("", "host profile needs --batch-size >= 1 (or 0 for train.batch_size), --iterations >= 1 and "
                          "--warmup >= 0.\n" + std::string(kUsage));
  if (!words.empty()) throw ConfigError("", "unexpected argument '" + words[0] + "'.\n" + std::string(kUsage));
  if (o.config.empty()) throw ConfigError("", "host " + o.command + " needs --config FILE.\n" + std::string(kUsage));
  return o;
}

}  // namespace tp::cli
