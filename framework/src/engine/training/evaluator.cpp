#include "engine/training/evaluator.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/evaluation/evaluation_pass.h"
#include "tp/framework/config/monitor_mode.h"
#include "tp/framework/error.h"

namespace tp {

Evaluator::Evaluator(const RunConfig& config, RunComponents& parts, const BatchPlacement& placement,
                     std::unique_ptr<DataLoader> loader, int64_t batches, Collectives& collectives)
    : config_(config),
      parts_(parts),
      placement_(placement),
      loader_(std::move(loader)),
      batches_(batches),
      collectives_(collectives),
      early_stopping_(config.early_stopping) {}

void Evaluator::add_average(const WeightAverage& average, const std::vector<StateTensor>& model_state) {
  averages_.push_back(&average);
  model_state_ = &model_state;
}

Scalars Evaluator::evaluate(const std::string& prefix) {
  Scalars result = evaluate_split({parts_, config_.metrics, placement_, *loader_, batches_, collectives_}, prefix);
  parts_.model->set_training(true); // training goes on
  return result;
}

void Evaluator::sanity_check(int64_t batches) {
  const int64_t limit = batches_ > 0 ? std::min(batches, batches_) : batches;
  const Scalars eval = evaluate_split({parts_, config_.metrics, placement_, *loader_, limit, collectives_,
                                       "the sanity check's evaluation before training (eval.sanity_batches = 0 skips it)",
                                       /*inference_mode=*/false},
                                      "val");
  parts_.model->set_training(true);
  std::string names;
  for (const auto& [name, value] : eval) names += (names.empty() ? "" : ", ") + name;
  for (const MonitorInUse& use : monitors_in_use(config_)) {
    const std::string key = std::string(use.table) + ".monitor";
    // An average's values ("val_ema/accuracy") are the live ones' names under its prefix.
    std::string live = use.monitor;
    for (const WeightAverage* average : averages_)
      if (const std::string prefix = "val_" + average->name() + "/"; live.starts_with(prefix))
        live = "val/" + live.substr(prefix.size());
    if (std::any_of(eval.begin(), eval.end(), [&](const auto& value) { return value.first == live; })) continue;
    throw ConfigError(key, key + " = \"" + use.monitor + "\" is not among the evaluated values (" + names +
                               (averages_.empty() ? "" : "; an average's are these under val_<name>/") +
                               "), found by the sanity check before training. Set it to one of them" + use.turned_off_by +
                               ".");
  }
}

std::optional<Scalars> Evaluator::evaluate_unless_stopped(const std::string& prefix,
                                                          const std::function<uint32_t()>& stop_flags) {
  EvaluationPass pass{parts_, config_.metrics, placement_, *loader_, batches_, collectives_};
  pass.stop_flags = stop_flags;
  pass.stopped = &stopped_by_;
  Scalars result = evaluate_split(pass, prefix);
  parts_.model->set_training(true); // training goes on, or the run saves and stops
  if (stopped_by_ != 0) return std::nullopt;
  return result;
}

std::optional<Scalars> Evaluator::run(int64_t step, LrScheduler& scheduler, const std::function<uint32_t()>& stop_flags) {
  stopped_by_ = 0;
  std::optional<Scalars> live = evaluate_unless_stopped("val", stop_flags);
  if (!live) return std::nullopt;
  Scalars eval = std::move(*live);
  for (const WeightAverage* average : averages_) {
    if (average->updates() == 0 && average->name() == "swa") continue; // SWA has not started yet
    const SwappedInAverage swapped(*average, *model_state_);
    const std::optional<Scalars> averaged = evaluate_unless_stopped("val_" + average->name(), stop_flags);
    if (!averaged) return std::nullopt; // `swapped` puts the live weights back
    eval.insert(eval.end(), averaged->begin(), averaged->end());
  }
  last_ = eval;
  last_step_ = step;
  monitor_.reset();
  for (const auto& [name, value] : eval) {
    if (name == config_.schedule.monitor) scheduler.step_metric(value);
    if (name == config_.checkpoint.monitor) monitor_ = value;
  }
  const bool average_not_started = std::any_of(averages_.begin(), averages_.end(), [&](const WeightAverage* a) {
    return a->updates() == 0 && config_.checkpoint.monitor.starts_with("val_" + a->name() + "/");
  });
  if (!monitor_ && !average_not_started && config_.checkpoint.save_top_k > 0 && !config_.train.fast_dev_run) {
    std::string names;
    for (const auto& [name, value] : eval) names += (names.empty() ? "" : ", ") + name;
    throw ConfigError("checkpoint.monitor", "checkpoint.monitor = \"" + config_.checkpoint.monitor +
                                                "\" is not among the evaluated values (" + names +
                                                "). Set it to one of them, or checkpoint.save_top_k = 0.");
  }
  return eval;
}

}  // namespace tp
