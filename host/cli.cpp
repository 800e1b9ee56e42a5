#include "cli.h"

#include <boost/program_options.hpp>

#include <sstream>

#include "tp/framework/error.h"

namespace tp::cli {
namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: host [train] --config FILE [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]\n"
    "                    [--resume auto|PATH]\n"
    "       host eval --config FILE [--checkpoint best|last|PATH] [--weights live|ema] [--set KEY=VALUE]...\n"
    "                 [--plugin-dir DIR]... [--output-dir DIR]\n"
    "       host export --checkpoint PATH [--weights live|ema] --format safetensors --output FILE\n"
    "       host plugins list [--verbose] [--config FILE] [--plugin-dir DIR]...\n"
    "       host plugins check FILE.so [--config FILE] [--set KEY=VALUE]... [--index N]... [--epoch E]\n"
    "       host plot RUN_DIR\n"
    "       host profile --config FILE [--devices cpu,cuda] [--batch-size N] [--precisions fp32,bf16,fp16]\n"
    "                    [--iterations N] [--warmup N] [--output PATH]\n"
    "       host --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] train|eval ...\n"
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
      ("checkpoint", po::value(&o.checkpoint), "eval: best, last or a checkpoint path; export: the checkpoint")
      ("weights", po::value(&o.weights),
       "eval, export: live (the trained weights, default) or ema (the checkpoint's averaged weights, [ema])")
      ("format", po::value(&o.format), "export: output format (safetensors)")
      ("output", po::value(&o.output), "export: output file; profile: where profile.json goes")
      ("devices", po::value(&o.devices), "profile: comma-separated devices, e.g. cpu,cuda (default: run.device)")
      ("precisions", po::value(&o.precisions), "profile: comma-separated fp32, bf16, fp16 (default: fp32)")
      ("batch-size", po::value(&o.batch_size), "profile: samples per batch (default: train.batch_size)")
      ("iterations", po::value(&o.iterations), "profile: timed forward passes (default: 50)")
      ("warmup", po::value(&o.warmup), "profile: untimed forward passes first (default: 10)")
      ("index", po::value(&o.indices)->composing(),
       "plugins check: also read this sample index of each dataset split (besides first, last and random ones)")
      ("epoch", po::value(&o.epoch), "plugins check: the epoch datasets read their samples in (default: 0)")
      ("resume", po::value(&o.resume), "train: continue from `auto` (the run's last.pt, if any) or a checkpoint path")
      ("verbose,v", po::bool_switch(&o.verbose), "more detail (debug log, plugin schemas)");
  return d;
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
  try {
    po::variables_map vm;
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
  if (o.command == "plot") {
    if (words.size() != 1)
      throw ConfigError("", "host plot takes exactly one RUN_DIR (the directory a training run wrote).\n" +
                                std::string(kUsage));
    o.run_dir = words[0];
    return o;
  }
  if (o.command == "export") {
    if (!words.empty() || o.output.empty() || o.checkpoint == "best")
      throw ConfigError("", "host export needs --checkpoint PATH and --output FILE.\n" + std::string(kUsage));
    return o;
  }
  if (o.command != "train" && o.command != "eval" && o.command != "profile")
    throw ConfigError("", "unknown command '" + o.command + "' (train, eval, export, plugins, plot, profile).\n" +
                              std::string(kUsage));
  if (o.command == "profile" && (o.batch_size < 0 || o.iterations < 1 || o.warmup < 0))
    throw ConfigError("", "host profile needs --batch-size >= 1 (or 0 for train.batch_size), --iterations >= 1 and "
                          "--warmup >= 0.\n" + std::string(kUsage));
  if (!words.empty()) throw ConfigError("", "unexpected argument '" + words[0] + "'.\n" + std::string(kUsage));
  if (o.config.empty()) throw ConfigError("", "host " + o.command + " needs --config FILE.\n" + std::string(kUsage));
  return o;
}

}  // namespace tp::cli
