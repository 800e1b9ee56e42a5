#include "verify/verify_child.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <c10/util/StringUtil.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>

#include "child_process.h"
#include "tp/framework/dist/batchnorm_sync.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "verify/verify.h"

namespace tp::cli::verify {
namespace {

// Every training check's run is short and quiet: no evaluation (the checks compare weights),
// no plots, TensorBoard, averages or early stopping (they would only cost time), no time limit,
// and the loss in the history at every step (the overfit check reads it).
const char* const kTrainingSets[] = {
    "progress.mode=\"off\"",       "plots.enabled=false",          "logging.tensorboard=false",
    "eval.strategy=\"no\"",        "checkpoint.save_top_k=0",      "checkpoint.load_best_at_end=false",
    "early_stopping.patience=0",   "train.max_time=\"\"",          "train.fast_dev_run=false",
    "ema.enabled=false",           "swa.enabled=false",            "train.log_every_steps=1",
};

/// Runs /proc/self/exe with `args` (args[0] is argv[0]), stdout and stderr into `log`, and waits,
/// sending SIGTERM once `stop_when` returns true (then *stopped is set). A Ctrl-C or SIGTERM to
/// `host verify` reaches the child once (it saves and exits as `host train` does) and then stops
/// the verification: tp::Interrupted. Returns its exit status (128 + N for signal N).
int run_logged(const std::vector<std::string>& args, const std::filesystem::path& log,
               const std::function<bool()>& stop_when, bool* stopped) {
  SignalForwarder signals;
  ChildOptions options;
  options.output = log;
  if (stop_when)
    options.watch = [&](pid_t) {
      if (*stopped || !stop_when()) return 0;
      *stopped = true;
      return SIGTERM;
    };
  const ChildExit exit = signals.run(args, options);
  if (const int signal_number = signals.received())
    throw Interrupted(signal_number, "host verify stopped by signal " + std::to_string(signal_number) +
                                         "; the interrupted check's run and log: " + log.string());
  return exit.exit_code;
}

}  // namespace

std::string ChildResult::failure() const {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  return "the child run in " + dir.string() + " exited " + std::to_string(exit_code) +
         (last.empty() ? "" : ": " + last) + " (its output: " + log.string() + ")";
}

NamedWeights ChildResult::last_weights() const { return load_checkpoint(dir / "checkpoints" / "last.pt").model; }

ChildResult ChildRunner::train(const std::filesystem::path& dir, const std::vector<std::string>& sets, int ranks,
                               const std::filesystem::path& resume, const std::function<bool()>& stop_when) const {
  std::vector<std::string> extra;
  for (const char* set : kTrainingSets) extra.insert(extra.end(), {"--set", set});
  for (const std::string& set : sets) extra.insert(extra.end(), {"--set", set});
  if (!resume.empty()) extra.insert(extra.end(), {"--resume", resume.string()});
  return run("train", dir, std::move(extra), ranks, stop_when);
}

ChildResult ChildRunner::eval(const std::filesystem::path& dir, const std::filesystem::path& checkpoint,
                              const std::vector<std::string>& sets, int ranks) const {
  // host eval reads no training setting (evaluate_checkpoint): the config evaluates as the user wrote it.
  std::vector<std::string> extra{"--checkpoint", checkpoint.string()};
  for (const std::string& set : sets) extra.insert(extra.end(), {"--set", set});
  return run("eval", dir, std::move(extra), ranks);
}

ChildResult ChildRunner::run(const std::string& command, const std::filesystem::path& dir,
                             std::vector<std::string> extra, int ranks, const std::function<bool()>& stop_when) const {
  std::filesystem::create_directories(dir);
  std::vector<std::string> args{"host"};
  if (ranks > 1) args.insert(args.end(), {"--nproc-per-node", std::to_string(ranks)});
  args.insert(args.end(), {command, "--config", options_.config, "--output-dir", dir.string()});
  for (const std::string& plugin_dir : options_.plugin_dirs) args.insert(args.end(), {"--plugin-dir", plugin_dir});
  if (options_.allow_insecure_plugin_dir) args.emplace_back("--allow-insecure-plugin-dir");
  // The user's overrides first, the check's after them: later --set values win.
  for (const std::string& set : options_.sets) args.insert(args.end(), {"--set", set});
  args.insert(args.end(), extra.begin(), extra.end());
  ChildResult result{.dir = dir, .log = dir.string() + ".log"};
  result.exit_code = run_logged(args, result.log, stop_when, &result.stopped);
  return result;
}

std::string moved_note(const WeightDifference& difference) {
  return "; the weights moved " + format_value(difference.moved) + " from their initial values" +
         (difference.moved < 1e-3 ? " (little: a wrong gradient shows only in proportion; raise --steps)" : "");
}

std::vector<std::string> epoch_warmup_reset_sets() {
  return {"schedule.warmup_epochs=0", "schedule.warmup_lr=0.0", "schedule.warmup_prefix=true",
          "schedule.cooldown_epochs=0"};
}

std::vector<std::string> constant_schedule_sets() {
  std::vector<std::string> sets{"schedule.name=\"constant\"", "schedule.interval=\"step\""};
  for (std::string& set : schedule_reset_sets()) sets.push_back(std::move(set));
  return sets;
}

std::vector<std::string> plain_sgd_sets() {
  std::vector<std::string> sets{"optim.name=\"sgd\"", "optim.momentum=0.0", "optim.nesterov=false",
                                "optim.weight_decay=0.0"};
  for (std::string& set : constant_schedule_sets()) sets.push_back(std::move(set));
  return sets;
}

WeightDifference compare_weights(const NamedWeights& a, const NamedWeights& b, const NamedWeights* initial) {
  if (a.size() != b.size() || (initial != nullptr && initial->size() != a.size()))
    throw Error("host verify: two runs saved different model states (" + std::to_string(a.size()) + " and " +
                std::to_string(b.size()) + " tensors).");
  const auto start_of = [&](size_t i, const at::Tensor& x) -> const at::Tensor* {
    if (initial == nullptr || (*initial)[i].first != a[i].first || (*initial)[i].second.sizes() != x.sizes()) return nullptr;
    return &(*initial)[i].second;
  };
  // A trained tensor that starts at zero (a bias) holds only what training added, which can be
  // tiny (a deep BatchNorm bias after two steps of a detector from scratch: 3e-6), so float32
  // rounding of its gradient is a large fraction of itself. Such a tensor is measured against the
  // largest change of any trained tensor instead (never a BatchNorm statistic, which moves by
  // O(1) and would hide a lost gradient): a bias whose gradient is lost or doubled still shows.
  double largest_change = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    if (const at::Tensor* start = start_of(i, a[i].second); start != nullptr && a[i].second.is_floating_point() &&
                                                              a[i].second.numel() > 0 && !is_batchnorm_statistic(a[i].first))
      largest_change = std::max(largest_change, (a[i].second.to(at::kDouble) - start->to(at::kDouble)).abs().max().item<double>());
  WeightDifference result;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& [name, x] = a[i];
    const at::Tensor& y = b[i].second;
    if (b[i].first != name || x.sizes() != y.sizes())
      throw Error("host verify: two runs saved different model states: '" + name + "' " + c10::str(x.sizes()) +
                  " against '" + b[i].first + "' " + c10::str(y.sizes()) + ".");
    ++result.tensors;
    if (!at::equal(x, y)) ++result.differing;
    if (!x.is_floating_point() || x.numel() == 0) continue;
    const at::Tensor xd = x.to(at::kDouble), yd = y.to(at::kDouble);
    double scale = std::max(xd.abs().max().item<double>(), 1e-12);
    if (const at::Tensor* start = start_of(i, x); start != nullptr) {
      const at::Tensor begin = start->to(at::kDouble);
      // Tensors that start at zero (biases) always move by 100% of themselves: leave them out.
      if (begin.abs().max().item<double>() > 0)
        result.moved = std::max(result.moved, (xd - begin).abs().max().item<double>() / scale);
      else if (!is_batchnorm_statistic(name))
        scale = std::max(scale, largest_change);
    }
    const double difference = (xd - yd).abs().max().item<double>() / scale;
    if (difference > result.relative || (std::isnan(difference) && !std::isnan(result.relative))) {
      result.relative = difference;
      result.worst = name;
    }
  }
  return result;
}

bool has_batchnorm_statistics(const NamedWeights& weights) {
  return std::any_of(weights.begin(), weights.end(),
                     [](const auto& entry) { return is_batchnorm_statistic(entry.first); });
}

std::vector<std::pair<std::string, double>> read_eval_values(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("host verify: `host eval` wrote no " + file.string() + ".");
  const nlohmann::ordered_json json = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) throw Error("host verify: " + file.string() + " is not the JSON object `host eval` writes.");
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [name, value] : json.items())
    if (value.is_number()) values.emplace_back(name, value.get<double>());
  return values;
}

}  // namespace tp::cli::verify
