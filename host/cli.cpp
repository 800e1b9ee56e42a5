#include "cli.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "cli_commands.h"
#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp::cli {
namespace po = boost::program_options;

namespace {

po::options_description describe(Options& o) {
  po::options_description d("options");
  d.add_options()
      ("help,h", po::bool_switch(&o.help), "show this help")
      ("version", po::bool_switch(&o.version),
       "print the host's version, the plugin ABI it speaks and the LibTorch, CUDA, cuDNN and NCCL it was built "
       "with, and exit")
      ("config,c", po::value(&o.config),
       "the run's TOML file; plugins check: the options of the components it names")
      ("set,s", po::value(&o.sets)->composing(),
       "override a key: --set optim.lr=3e-4 (TOML value syntax); plugins check without --config: a component "
       "option, --set size=8")
      ("plugin-dir,p", po::value(&o.plugin_dirs)->composing(), "extra plugin directory (highest precedence)")
      ("allow-insecure-plugin-dir", po::bool_switch(&o.allow_insecure_plugin_dir),
       "load plugins from files or directories others can write (refused by default: a plugin is code)")
      ("output-dir,o", po::value(&o.output_dir),
       "run directory (overrides run.output_dir); sweep: the sweep's directory, a cell in each <dir>/<cell>; "
       "compare: where the comparison files go (default: the current directory)")
      ("checkpoint", po::value(&o.checkpoint),
       "eval, predict: best (the run's checkpoints/best.pt), last (checkpoints/last.pt) or a checkpoint path; "
       "default: best; export: the checkpoint file (required)")
      ("weights", po::value(&o.weights),
       "eval, export, predict: live (the trained weights), ema or swa (the checkpoint's averaged weights, [ema], "
       "[swa]); default: the weights the run's checkpoint.monitor measured (ema for val_ema/..., else live)")
      ("split", po::value(&o.split),
       "eval: val (default) or test; predict: val (default), test or train; shards write: train (default), val or test")
      ("out", po::value(&o.out), "shards write: the directory the shards go to (created when missing)")
      ("shard-size", po::value(&o.shard_size),
       "shards write: the largest shard, e.g. 256MB (default), 1GiB; a sample is never split across shards")
      ("prefix", po::value(&o.prefix), "shards write: shard file names start with this (default: the split's name)")
      ("seed", po::value(&o.seed),
       "shards write: the seed of the samples' shuffled order, an integer >= 0 (default: the config's run.seed)")
      ("keep-order", po::bool_switch(&o.keep_order),
       "shards write: keep the listing's order (class by class) instead of shuffling the samples across shards")
      ("format", po::value(&o.format),
       "export: output format (safetensors); predict: csv (default), jsonl, npy or png (a segmentation model's "
       "masks, one file per sample)")
      ("output", po::value(&o.output),
       "export: output file; profile: where profile.json goes; predict: the predictions file "
       "(default: RUN_DIR/predictions_<split>_<checkpoint>[_ema|_swa][_tta-hflip].<format>); eval: the results "
       "file (default: RUN_DIR/eval_<checkpoint>[_ema|_swa][_test].json)")
      ("outputs", po::value(&o.outputs), "predict: comma-separated model outputs to write (default: all)")
      ("tta", po::value(&o.tta), "predict: hflip averages each output with that of the horizontally flipped input")
      ("images", po::value(&o.images),
       "predict: new images, without labels, read with the evaluation split's preprocessing: a directory (its image "
       "files, recursively, sorted by path) or a text file listing them, one per line")
      ("grid", po::value(&o.grid)->composing(),
       "sweep: KEY=V1,V2,... one axis of the grid (TOML values); repeat for more axes, the product is run")
      ("metric", po::value(&o.metric),
       "sweep, compare: the metric to compare (default: checkpoint.monitor of the runs, e.g. val/loss)")
      ("mode", po::value(&o.mode),
       "sweep, compare: min or max, whether a lower or higher --metric is better (default: the runs' "
       "checkpoint.mode for their monitor, else by the name: loss, error, mae, mse, rmse, nll lower; others higher)")
      ("keep-going", po::bool_switch(&o.keep_going),
       "sweep: train every cell even when one fails (a diverged lr); the failed cells are recorded in sweep.toml "
       "and named at the end, and the sweep exits with the first one's exit code")
      ("devices", po::value(&o.devices), "profile: comma-separated devices, e.g. cpu,cuda (default: run.device)")
      ("precisions", po::value(&o.precisions), "profile: comma-separated fp32, bf16, fp16 (default: fp32)")
      ("batch-size", po::value(&o.batch_size), "profile: samples per batch (default: train.batch_size)")
      ("iterations", po::value(&o.iterations), "profile: timed forward passes (default: 50)")
      ("warmup", po::value(&o.warmup), "profile: untimed forward passes first (default: 10)")
      ("index", po::value(&o.indices)->composing(),
       "plugins check: also read this sample index of each dataset split (besides first, last and random ones)")
      ("epoch", po::value(&o.epoch), "plugins check: the epoch datasets read their samples in (default: 0)")
      ("samples", po::value(&o.samples),
       "plugins check: how many samples of each split to read: N (spread evenly, first and last included) or all "
       "(default: the first, the last and 6 spread by a fixed hash)")
      ("checks", po::value(&o.checks),
       "verify: comma-separated checks to run (default: all of data, loss, metric, gradients, accumulation, "
       "resume, distributed, overfit)")
      ("steps", po::value(&o.steps),
       "verify: optimizer steps of each training check (default: 4); tune lr: the sweep's length (default: 100)")
      ("min-lr", po::value(&o.min_lr),
       "tune lr: the sweep's first lr (default: 1e-7)")
      ("max-lr", po::value(&o.max_lr), "tune lr: the sweep's last lr (default: 10)")
      ("headroom", po::value(&o.headroom), "tune batch-size: share of the memory limit kept free (default: 0.1)")
      ("max", po::value(&o.max_batch), "tune batch-size: the largest micro-batch to try (default: the training split)")
      ("keep-global-batch", po::bool_switch(&o.keep_global_batch),
       "tune batch-size: print the batch_size and grad_accum_steps that keep batch_size x grad_accum_steps")
      ("memory-limit", po::value(&o.memory_limit),
       "tune batch-size: the memory a step may use, e.g. 4GiB (default: the device's; required on CPU)")
      ("resume", po::value(&o.resume), "train: continue from `auto` (the run's last.pt, if any) or a checkpoint path")
      ("mlflow", po::bool_switch(&o.mlflow),
       "eval: also log the metrics to the MLflow run the run directory is tracked in (docs/experiment_tracking.md)")
      ("new-run", po::bool_switch(&o.new_run),
       "train: start a new run in a run directory that holds an earlier one: its files move into "
       "<run dir>/earlier/<UTC time>/ first (nothing is deleted)")
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
  if (!o.images.empty() && !o.split.empty())
    throw ConfigError("--images", "host predict: --images predicts the given files, --split a split of the run; "
                                  "give one of them.");
  if (o.split.empty()) o.split = "val";
  if (o.split != "val" && o.split != "test" && o.split != "train")
    throw ConfigError("--split", "host predict --split must be val, test or train (got '" + o.split + "').");
  if (o.format.empty()) o.format = "csv";
  if (o.format != "csv" && o.format != "jsonl" && o.format != "npy" && o.format != "png")
    throw ConfigError("--format", "host predict --format must be csv, jsonl, npy or png (got '" + o.format + "').");
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
Options check_tune(Options o, const std::vector<std::string>& words, bool steps_given, const std::string& usage) {
  if (words.empty() || (words[0] != "lr" && words[0] != "batch-size"))
    throw ConfigError("", "host tune: say `lr` (the learning-rate range test) or `batch-size` (the largest micro-batch "
                          "that fits).\n" + usage);
  o.action = words[0];
  if (words.size() > 1) throw ConfigError("", "unexpected argument '" + words[1] + "'.\n" + usage);
  if (o.config.empty())
    throw ConfigError("", "host tune " + o.action + " needs --config FILE.\n" + usage);
  if (o.action == "lr") {
    if (!steps_given) o.steps = 100;
    if (!(o.min_lr > 0 && std::isfinite(o.min_lr)))
      throw ConfigError("--min-lr", "host tune lr --min-lr must be a positive lr (got " + short_number(o.min_lr) + ").");
    if (!(o.max_lr > o.min_lr && std::isfinite(o.max_lr)))
      throw ConfigError("--max-lr", "host tune lr --max-lr must be above --min-lr (got " + short_number(o.max_lr) + " and " +
                                        short_number(o.min_lr) + "): the sweep rises from one to the other.");
    if (o.steps < 13)
      throw ConfigError("--steps", "host tune lr --steps must be at least 13 (got " + std::to_string(o.steps) +
                                       "): the suggestion skips the first tenth and the last 5 points and needs a descent between.");
  } else if (!(o.headroom >= 0 && o.headroom < 1) || o.max_batch < 0) {
    throw ConfigError(o.max_batch < 0 ? "--max" : "--headroom",
                      "host tune batch-size needs 0 <= --headroom < 1 (a share of the memory limit; got " +
                          short_number(o.headroom) + ") and --max >= 0 (0: no cap; got " +
                          std::to_string(o.max_batch) + ").");
  }
  return o;
}

// The command the words name ("tune" + "lr" -> "tune lr"), or nullptr when they name none (the
// checks below then say what is wrong).
const CommandSpec* named_command(const std::string& command, const std::vector<std::string>& words) {
  if (command == "plugins" || command == "tune" || command == "shards") return words.empty() ? nullptr : find_command(command + " " + words[0]);
  return find_command(command);
}

// `host --help`: every synopsis, each command's summary, every option.
std::string full_help(const po::options_description& options) {
  std::ostringstream help;
  help << usage_text() << "\ncommands (host <command> --help: its synopsis and options):\n";
  for (const CommandSpec& command : commands()) {
    std::string name(command.name);
    help << "  " << name << std::string(name.size() < 17 ? 17 - name.size() : 1, ' ') << command.summary << "\n";
  }
  help << "\n" << options << "\n";
  return help.str();
}

// `host <command> --help`: its synopsis, its summary, its options and the global ones.
std::string command_help(const CommandSpec& command, const po::options_description& options) {
  po::options_description own("options of host " + std::string(command.name));
  po::options_description global("global options");
  for (const auto& option : options.options()) {
    const std::string& name = option->long_name();
    if (std::find(command.options.begin(), command.options.end(), name) != command.options.end()) own.add(option);
    if (std::find(kGlobalOptions.begin(), kGlobalOptions.end(), name) != kGlobalOptions.end()) global.add(option);
  }
  std::ostringstream help;
  help << wrapped_synopsis(command) << command.summary << " (docs/commands.md)\n\n";
  if (!command.options.empty()) help << own << "\n";
  help << global << "\n";
  return help.str();
}

// An option given to a command that does not take it is an error, not silently ignored: the one
// list (cli_commands.cpp) is what each command reads.
void refuse_foreign_options(const CommandSpec& command, const po::variables_map& vm) {
  for (const auto& [name, value] : vm) {
    if (name == "words" || value.defaulted()) continue;
    if (std::find(command.options.begin(), command.options.end(), name) != command.options.end()) continue;
    if (std::find(kGlobalOptions.begin(), kGlobalOptions.end(), name) != kGlobalOptions.end()) continue;
    throw ConfigError("--" + name, "host " + std::string(command.name) + " does not take --" + name +
                                       ". Its synopsis:\n" + wrapped_synopsis(command) + "(host " +
                                       std::string(command.name) + " --help lists what each option does).");
  }
}

// What an option's value names, for the refusal of an empty one.
std::string what_option_takes(const std::string& name) {
  static const std::pair<const char*, const char*> kTakes[] = {
      {"images", "a directory, a list file or an image"}, {"checkpoint", "best, last or a checkpoint path"},
      {"config", "a TOML file"},          {"output", "a file"},
      {"output-dir", "a directory"},      {"out", "a directory"},
      {"plugin-dir", "a directory"},      {"resume", "auto or a checkpoint path"},
      {"outputs", "model output names"},  {"set", "KEY=VALUE"}};
  for (const auto& [option, takes] : kTakes)
    if (name == option) return takes;
  return "a value";
}

// An option given an empty value (`--images "$DIR"` with DIR unset) is refused, not read as "not
// given": predict silently predicted the val split under the new images' name, and an empty
// --checkpoint read as a checkpoint of 0 tensors (security trial F12). So is an empty argument,
// and a list option that names nothing (--outputs ",,").
void refuse_empty_values(const po::variables_map& vm) {
  for (const auto& [name, value] : vm) {
    if (value.defaulted()) continue;
    bool empty = false;
    if (const auto* text = boost::any_cast<std::string>(&value.value())) empty = text->empty();
    if (const auto* list = boost::any_cast<std::vector<std::string>>(&value.value()))
      empty = std::any_of(list->begin(), list->end(), [](const std::string& item) { return item.empty(); });
    if (name == "outputs" && !empty) empty = split_list(value.as<std::string>()).empty();
    if (!empty) continue;
    if (name == "words")
      throw ConfigError("", "command line: an argument is empty (an unset shell variable?); give what it names, or "
                            "leave it out.");
    throw ConfigError("--" + name, "--" + name + " is empty (an unset shell variable?): give " +
                                       what_option_takes(name) + ", or leave the option out.");
  }
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
    throw ConfigError("", std::string("command line: ") + e.what() + ".\n" + usage_text());
  }
  const bool command_given = !words.empty();
  if (command_given) {
    o.command = words[0];
    words.erase(words.begin());
  }
  const CommandSpec* spec = named_command(o.command, words);
  if (o.version) return o;
  if (o.help) { // `host --help`: everything; `host <command> --help`: that command
    o.help_text = spec && command_given ? command_help(*spec, options) : full_help(options);
    return o;
  }
  if (spec) refuse_foreign_options(*spec, vm);
  refuse_empty_values(vm);
  // Errors about one command show its synopsis; the others, every command's.
  const std::string usage = spec ? wrapped_synopsis(*spec) : usage_text();
  if (o.command == "plugins") {
    if (words.empty()) throw ConfigError("", "host plugins: say `list` or `check FILE.so`.\n" + usage);
    o.action = words[0];
    if (o.action == "check") {
      if (words.size() != 2) throw ConfigError("", "host plugins check takes exactly one FILE.so.\n" + usage);
      o.file = words[1];
    } else if (o.action != "list" || words.size() != 1) {
      throw ConfigError("", "host plugins: unknown action '" + o.action + "'.\n" + usage);
    }
    return o;
  }
  if (o.command == "tune") return check_tune(std::move(o), words, vm.count("steps") > 0, usage);
  if (o.command == "shards") {
    if (words.size() != 1 || words[0] != "write")
      throw ConfigError("", "host shards: say `write` (an image_folder split as WebDataset tar shards).\n" + usage);
    o.action = words[0];
    if (o.config.empty() || o.out.empty())
      throw ConfigError("", "host shards write needs --config FILE and --out DIR.\n" + usage);
    if (o.split.empty()) o.split = "train";
    if (o.split != "train" && o.split != "val" && o.split != "test")
      throw ConfigError("--split", "host shards write --split must be train, val or test (got '" + o.split + "').");
    if (o.prefix.find('/') != std::string::npos || o.prefix == "." || o.prefix == "..")
      throw ConfigError("--prefix", "host shards write --prefix is a file name start, without '/' and not '.' or "
                                    "'..' (got '" + o.prefix + "'); put the directory in --out.\n" + usage);
    uint64_t seed_value = 0;
    const auto [seed_end, seed_error] = std::from_chars(o.seed.data(), o.seed.data() + o.seed.size(), seed_value);
    if (!o.seed.empty() && (seed_error != std::errc{} || seed_end != o.seed.data() + o.seed.size()))
      throw ConfigError("--seed", "host shards write --seed takes an integer from 0 to 2^64 - 1 (got '" + o.seed +
                                      "').\n" + usage);
    if (!o.seed.empty() && o.keep_order)
      throw ConfigError("--seed", "host shards write: --seed sets the shuffled order and --keep-order keeps the "
                                  "listing's: give one of them.\n" + usage);
    return o;
  }
  if (o.command == "plot" || o.command == "mlflow-sync") {
    if (words.size() != 1)
      throw ConfigError("", "host " + o.command + " takes exactly one RUN_DIR (the directory a training run wrote).\n" +
                                usage);
    o.run_dir = words[0];
    return o;
  }
  if (!o.mode.empty() && o.mode != "min" && o.mode != "max")
    throw ConfigError("--mode", "--mode must be min (a lower --metric is better) or max (got '" + o.mode + "').\n" +
                                    usage);
  if (o.command == "compare") {
    if (words.empty())
      throw ConfigError("", "host compare needs at least one RUN_DIR (directories training runs wrote).\n" +
                                usage);
    o.run_dirs = words;
    return o;
  }
  if (o.command == "export") {
    if (!words.empty() || o.output.empty() || o.checkpoint == "best")
      throw ConfigError("", "host export needs --checkpoint PATH and --output FILE.\n" + usage);
    return o;
  }
  if (o.command != "train" && o.command != "eval" && o.command != "predict" && o.command != "profile" &&
      o.command != "sweep" && o.command != "verify")
    throw ConfigError("", "unknown command '" + o.command +
                              "' (train, eval, predict, export, plugins, plot, mlflow-sync, profile, sweep, compare, verify, tune, "
                              "shards).\n" +
                              usage);
  if (o.command == "verify") select_verify_checks(o);
  check_split_and_format(o);
  if (o.new_run && !o.resume.empty())
    throw ConfigError("--new-run", "host train --new-run starts a new run; --resume continues one: give one of them.\n" +
                                       usage);
  if (o.command == "sweep" && o.grid.empty())
    throw ConfigError("--grid", "host sweep needs at least one --grid KEY=V1,V2,... (the values to try).\n" +
                                    usage);
  if (o.command == "profile" && (o.batch_size < 0 || o.iterations < 1 || o.warmup < 0))
    throw ConfigError("", "host profile needs --batch-size >= 1 (or 0 for train.batch_size), --iterations >= 1 and "
                          "--warmup >= 0.\n" + usage);
  if (!words.empty()) throw ConfigError("", "unexpected argument '" + words[0] + "'.\n" + usage);
  if (o.config.empty()) throw ConfigError("", "host " + o.command + " needs --config FILE.\n" + usage);
  return o;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

}  // namespace tp::cli
