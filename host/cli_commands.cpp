#include "cli_commands.h"

#include <algorithm>
#include <cctype>

namespace tp::cli {

const std::vector<std::string_view> kGlobalOptions = {"help", "verbose", "allow-insecure-plugin-dir"};

namespace {

// Synopsis order: what the command needs, then what it chooses, then the shared run options.
const std::vector<CommandSpec> kCommands = {
    {"train",
     "host [train] --config FILE [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR] [--resume auto|PATH] "
     "[--new-run]",
     "trains; writes the run directory; --resume auto continues from its checkpoints/last.pt",
     {"config", "set", "plugin-dir", "output-dir", "resume", "new-run"}},
    {"eval",
     "host eval --config FILE [--checkpoint best|last|PATH] [--weights live|ema|swa] [--split val|test] [--mlflow] "
     "[--output FILE] [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]",
     "evaluates a checkpoint on the validation or the test split",
     {"config", "checkpoint", "weights", "split", "mlflow", "output", "set", "plugin-dir", "output-dir"}},
    {"predict",
     "host predict --config FILE [--checkpoint best|last|PATH] [--weights live|ema|swa] [--split val|test|train | "
     "--images DIR|LIST|IMAGE] [--output FILE] [--format csv|jsonl|npy|png] [--outputs NAME,...] [--tta hflip] "
     "[--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]",
     "writes the model's outputs for every sample of a split, or for new image files",
     {"config", "checkpoint", "weights", "split", "images", "output", "format", "outputs", "tta", "set", "plugin-dir",
      "output-dir"}},
    {"export",
     "host export --checkpoint PATH [--weights live|ema|swa] --format safetensors --output FILE [--plugin-dir DIR]...",
     "writes a checkpoint's model weights as safetensors", {"checkpoint", "weights", "format", "output", "plugin-dir"}},
    {"plugins list", "host plugins list [--config FILE] [--set KEY=VALUE]... [--plugin-dir DIR]...",
     "lists the plugin search path and every component (--verbose: files, ABI, config schemas)",
     {"config", "set", "plugin-dir"}},
    {"plugins check",
     "host plugins check FILE.so [--config FILE] [--set KEY=VALUE]... [--plugin-dir DIR]... [--index N]... "
     "[--epoch E] [--samples N|all]",
     "checks one plugin library as a run would use it", {"config", "set", "plugin-dir", "index", "epoch", "samples"}},
    {"verify",
     "host verify --config FILE [--checks data,loss,metric,gradients,accumulation,resume,distributed,overfit] "
     "[--steps N] [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]",
     "runs a configuration and its plugins through short checks before a long job",
     {"config", "checks", "steps", "set", "plugin-dir", "output-dir"}},
    {"tune lr",
     "host tune lr --config FILE [--min-lr 1e-7] [--max-lr 10] [--steps 100] [--set KEY=VALUE]... "
     "[--plugin-dir DIR]... [--output-dir DIR]",
     "the learning-rate range test; suggests an lr (writes into <run dir>/tune/)",
     {"config", "min-lr", "max-lr", "steps", "set", "plugin-dir", "output-dir"}},
    {"tune batch-size",
     "host tune batch-size --config FILE [--headroom 0.1] [--max N] [--keep-global-batch] [--memory-limit SIZE] "
     "[--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]",
     "finds the largest micro-batch that fits the device (writes into <run dir>/tune/)",
     {"config", "headroom", "max", "keep-global-batch", "memory-limit", "set", "plugin-dir", "output-dir"}},
    {"sweep",
     "host sweep --config FILE --grid KEY=V1,V2,... [--grid ...]... [--metric NAME] [--mode min|max] "
     "[--keep-going] [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]",
     "trains every cell of a grid of settings and compares them",
     {"config", "grid", "metric", "mode", "keep-going", "set", "plugin-dir", "output-dir"}},
    {"compare", "host compare RUN_DIR... [--metric NAME] [--mode min|max] [--output-dir DIR]",
     "compares finished runs: their differing settings, metric, time and memory", {"metric", "mode", "output-dir"}},
    {"shards write",
     "host shards write --config FILE --out DIR [--split train|val|test] [--shard-size 256MB] [--prefix NAME] "
     "[--seed N | --keep-order] [--set KEY=VALUE]... [--plugin-dir DIR]...",
     "writes an image_folder split as WebDataset tar shards, its samples shuffled across them (docs/datasets.md, "
     "\"Sharded data\")",
     {"config", "out", "split", "shard-size", "prefix", "seed", "keep-order", "set", "plugin-dir"}},
    {"plot", "host plot RUN_DIR", "draws a run's plots again from its history", {}},
    {"mlflow-sync", "host mlflow-sync RUN_DIR",
     "sends what a run's MLflow server lacks: its history, artifacts and status (docs/experiment_tracking.md)", {}},
    {"profile",
     "host profile --config FILE [--devices cpu,cuda] [--precisions fp32,bf16,fp16] [--batch-size N] "
     "[--iterations N] [--warmup N] [--output PATH] [--set KEY=VALUE]... [--plugin-dir DIR]... [--output-dir DIR]",
     "times the model's forward pass per device and precision",
     {"config", "devices", "precisions", "batch-size", "iterations", "warmup", "output", "set", "plugin-dir",
      "output-dir"}},
};

}  // namespace

std::span<const CommandSpec> commands() { return kCommands; }

const CommandSpec* find_command(std::string_view name) {
  const auto it = std::find_if(kCommands.begin(), kCommands.end(), [&](const CommandSpec& c) { return c.name == name; });
  return it == kCommands.end() ? nullptr : &*it;
}

std::string wrapped_synopsis(const CommandSpec& command, std::string_view lead, std::size_t width) {
  const std::string_view synopsis = command.synopsis;
  // Continuation lines start under the first argument: after "host ", the command's words and a space.
  const std::size_t indent = lead.size() + 5 + command.name.size() + 1 + (command.name == "train" ? 2 : 0);
  std::string out;
  std::string line(lead);
  std::size_t start = 0;
  while (start < synopsis.size()) {
    // A unit: a word, or a bracketed group with what follows it ("[--set KEY=VALUE]..."), never split.
    std::size_t end = start;
    for (int depth = 0; end < synopsis.size() && (depth > 0 || synopsis[end] != ' '); ++end)
      depth += synopsis[end] == '[' ? 1 : synopsis[end] == ']' ? -1 : 0;
    const std::string_view unit = synopsis.substr(start, end - start);
    if (line.size() + 1 + unit.size() > width && line.size() > indent) {
      out += line + "\n";
      line = std::string(indent, ' ');
    } else if (line.size() > lead.size() && line.back() != ' ') {
      line += ' ';
    }
    line += unit;
    start = end + 1;
  }
  return out + line + "\n";
}

std::string usage_text(std::size_t width) {
  std::string out;
  for (const CommandSpec& command : kCommands) out += wrapped_synopsis(command, out.empty() ? "usage: " : "       ", width);
  out += "       host --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] "
         "train|eval|predict|sweep ...\n"
         "            data-parallel: N ranks on this node (docs/distributed.md); torchrun --no-python host ... also "
         "works\n";
  return out;
}

std::vector<std::string> synopsis_flags(std::string_view synopsis) {
  std::vector<std::string> flags;
  for (std::size_t at = synopsis.find("--"); at != std::string_view::npos; at = synopsis.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < synopsis.size() && (std::isalnum(static_cast<unsigned char>(synopsis[end])) || synopsis[end] == '-'))
      ++end;
    std::string flag(synopsis.substr(at + 2, end - at - 2));
    if (!flag.empty() && std::find(flags.begin(), flags.end(), flag) == flags.end()) flags.push_back(flag);
    at = end - 2;
  }
  return flags;
}

}  // namespace tp::cli
