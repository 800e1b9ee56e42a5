// The overfit check: train.overfit_batches = 2 (the same 2 training batches every epoch,
// unshuffled) for at most kOverfitSteps optimizer steps; the training loss logged at each step
// must fall below 5% of the first step's. A model that cannot memorise two batches will not
// learn the data set: outputs the loss does not expect (probabilities where it takes logits), a
// learning rate far off, labels that do not belong to the inputs, a layer that never trains.
// Cost: one training on 2 batches, stopped (SIGTERM, it saves) as soon as the history shows the
// target (46 steps for quickstart's small_cnn), kOverfitSteps when it fails.
// A loss whose named terms include some with a floor above zero (plugin ABI 1.9, "floored terms":
// FCOS's centre-ness BCE against soft targets, whose floor is their entropy) is judged on the sum
// of its other terms, read from the epoch records (2 steps each here); the floored ones are shown.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/plugin/loss_proxy.h"
#include "verify/verify.h"
#include "verify/verify_child.h"

namespace tp::cli::verify {
namespace {

constexpr int64_t kOverfitBatches = 2;
constexpr int64_t kOverfitSteps = 300; // multi_output's box head needs 176; stopping early makes a margin cheap
constexpr double kTargetFraction = 0.05; // unless the loss declares its own (plugin ABI 1.9)

/// The number after `"key":` in `line`, or NaN.
double number_after(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return NAN;
  const char* start = line.c_str() + at + key.size() + 3;
  char* stop = nullptr;
  const double value = std::strtod(start, &stop);
  return stop == start ? NAN : value;
}

/// How the loss went: its first value, its lowest, and the first step below the target.
struct LossCourse {
  double start = NAN;
  double lowest = INFINITY;
  int64_t lowest_step = 0;
  int64_t reached = 0; ///< 0 while the loss has not fallen below the target fraction of its start
  std::vector<double> floored_start, floored_lowest; ///< per floored term
};

/// Reads history.jsonl (appended and flushed per record by the running child, so a last line
/// still being written is left out: it does not end the object yet): the "step" records'
/// train/loss or, with `floored` terms, the "epoch" records' train/loss less those terms.
LossCourse read_course(const std::filesystem::path& history, const std::vector<std::string>& floored, double target) {
  LossCourse course;
  course.floored_start.assign(floored.size(), NAN);
  course.floored_lowest.assign(floored.size(), INFINITY);
  const std::string kind = floored.empty() ? "{\"kind\":\"step\"" : "{\"kind\":\"epoch\"";
  std::ifstream in(history);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(kind) || !line.ends_with("}")) continue;
    double loss = number_after(line, "train/loss");
    const double step = number_after(line, "step");
    for (size_t t = 0; t < floored.size(); ++t) {
      const double term = number_after(line, "train/loss/" + floored[t]);
      loss -= term; // NaN when the term is missing: the record is skipped
      if (std::isnan(course.floored_start[t])) course.floored_start[t] = term;
      course.floored_lowest[t] = std::min(course.floored_lowest[t], term);
    }
    if (std::isnan(loss) || std::isnan(step)) continue;
    if (std::isnan(course.start)) course.start = loss;
    if (loss < course.lowest) {
      course.lowest = loss;
      course.lowest_step = static_cast<int64_t>(step);
    }
    if (course.reached == 0 && loss < target * course.start) course.reached = static_cast<int64_t>(step);
  }
  return course;
}

}  // namespace

CheckResult check_overfit(VerifyContext& context) {
  const LossDescription& declared = context.parts().loss->description();
  const std::vector<std::string>& floored = declared.floored_terms;
  const double target = declared.overfit_fraction > 0 ? declared.overfit_fraction : kTargetFraction;
  CheckResult row("overfit", "< " + format_value(100 * target) + "% of start in " + std::to_string(kOverfitSteps) +
                                 " steps");
  const RunConfig& config = context.config();
  if (!config.data.batch_transforms.empty()) {
    // A blend's soft target has an entropy the loss cannot go below, and it is drawn anew every
    // step: two batches are not there to memorise.
    row.status = Status::kSkip;
    row.reason = "[[data.batch_transforms]] blend every step's batch anew into soft targets, so two batches do not "
                 "repeat and the loss has a floor; check the model without them (a config with the table removed)";
    return row;
  }
  const std::string judged = floored.empty() ? "training loss" : "training loss less its floored terms";
  const std::filesystem::path dir = context.check_dir("overfit") / "run";
  const std::filesystem::path history = dir / "history.jsonl";
  // At the config's lr throughout: a warmup or decay over the real run's length would only slow
  // memorising (and a warmup longer than the budget is refused).
  // No evaluation: only the training loss is judged, and overfit_batches evaluates on training
  // batches, which lack a dataset's evaluation-only fields (coco_detection's gt_*, which the
  // metrics then fail on; the metric check runs them on a val batch).
  std::vector<std::string> sets{"train.overfit_batches=" + std::to_string(kOverfitBatches),
                                "train.max_steps=" + std::to_string(kOverfitSteps), "eval.strategy=\"no\""};
  for (std::string& set : constant_schedule_sets()) sets.push_back(std::move(set));
  // Label smoothing puts the loss's floor at the entropy of the smoothed targets (0.50 for 0.1
  // over 10 classes, a fifth of the start): a loss table with the conventional key trains
  // without it here.
  const auto smoothing = config.loss.options["label_smoothing"].value<double>();
  if (smoothing && *smoothing > 0) {
    sets.emplace_back("loss.label_smoothing=0.0");
    row.notes.emplace_back("trained with loss.label_smoothing = 0 (configured " + format_value(*smoothing) +
                           "): smoothed targets put the loss's floor above the target");
  }
  // Re-reads the history at 10 Hz while the child trains (a few kB): stops at the target.
  const ChildResult run = ChildRunner(context.options())
                              .train(dir, sets, 1, {}, [&] { return read_course(history, floored, target).reached > 0; });
  if (!run.ok()) {
    row.status = Status::kFail;
    row.reason = run.failure();
    return row;
  }
  const LossCourse course = read_course(history, floored, target);
  if (declared.overfit_fraction > 0)
    row.notes.emplace_back(context.parts().loss->id() + " declares its target, " +
                           format_value(100 * declared.overfit_fraction) + "% of start (the host's is " +
                           format_value(100 * kTargetFraction) + "%)");
  if (std::isnan(course.start)) {
    row.status = Status::kFail;
    row.reason = "the run logged no " + judged + " (" + history.string() +
                 (floored.empty() ? ")" : "; the loss declares floored terms its records do not hold)");
    return row;
  }
  for (size_t t = 0; t < floored.size(); ++t)
    row.notes.emplace_back("'" + floored[t] + "' has a floor (the loss declares it) and is not judged: " +
                           format_value(course.floored_start[t]) + " -> " + format_value(course.floored_lowest[t]));
  const std::string batches = std::to_string(kOverfitBatches) + " batches of " +
                              std::to_string(context.config().train.batch_size);
  if (course.reached > 0) {
    row.measured = "step " + std::to_string(course.reached) + " (" + format_value(course.start) + " -> " +
                   format_value(course.lowest) + ")";
    row.reason = batches + ": the " + judged + " fell from " + format_value(course.start) + " below " +
                 format_value(target * course.start) + " at step " + std::to_string(course.reached);
    return row;
  }
  row.status = Status::kFail;
  row.measured = format_value(100 * course.lowest / course.start) + "% of start";
  row.reason = batches + ": the " + judged + " went from " + format_value(course.start) + " to at best " +
               format_value(course.lowest) + " (step " + std::to_string(course.lowest_step) + ") in " +
               std::to_string(kOverfitSteps) + " steps";
  row.notes.emplace_back("a model that cannot memorise two batches will not learn the data set: outputs the loss does "
                         "not expect (probabilities where it takes logits), a learning rate far off, labels that do "
                         "not belong to their inputs, layers that never train (see the gradients check)");
  return row;
}

}  // namespace tp::cli::verify
