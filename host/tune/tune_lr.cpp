// `host tune lr --config FILE [--min-lr 1e-7] [--max-lr 10] [--steps 100] [--set ...]
// [--output-dir DIR]`: the learning-rate range test (Leslie Smith; fastai's and Lightning's
// lr_find). A throwaway training run sweeps the lr exponentially between the bounds, the loss is
// smoothed as it arrives, the sweep stops when it diverges, and the steepest descent of the
// point two thirds down the longest descent of the smoothed loss is suggested (fastai's "valley"
// rule; docs/tune.md says why this rule and not Lightning's, which is printed for reference).
//
// Choices, and why:
// - The sweep is a child `host train` (schedule.name = "range_test") writing only into
//   <run dir>/tune/lr-<time>/: a fresh process builds a fresh model from the configuration, so
//   nothing of the run (its checkpoints, history, plots) is read or changed, and the memory and
//   plugin state of the sweep end with it.
// - This process follows the child's history.jsonl (train.log_every_steps = 1; each record is
//   flushed when written) and stops the child with SIGTERM when the smoothed loss diverges. The
//   child finishes its step and saves in the scratch directory (its checkpoint is deleted
//   afterwards); the points it trained past the divergence are not used, as Lightning stops at
//   the first diverged point. The cost is at most a few steps of ~0.1 s of polling.
// - train.nan_policy = "skip" in the child: a non-finite loss is a divergence to record, not an
//   error that should end the run before this process has read it.
// - The lr of each point is computed here with the schedule's own function (range_test_lr), not
//   read back from the history, whose lr is parameter group 0's and may be scaled
//   ([[optim.param_groups]], optim.layer_decay): the suggestion is for optim.lr.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "commands.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/report/history_line.h"
#include "tp/framework/report/lr_find_plot.h"
#include "tp/framework/util/atomic_file.h"
#include "tune/tune_common.h"
#include "tune/tune_lr_rule.h"
#include "tp/framework/util/short_number.h"

namespace tp::cli {
namespace {

namespace fs = std::filesystem;

// Lightning's defaults (lightning.pytorch.tuner.lr_finder): the smoothing factor and the divergence
// threshold (fastai's are the same), and the points its rule skips.
constexpr double kBeta = 0.98;
constexpr double kStopFactor = 4.0;
constexpr std::size_t kLightningSkipBegin = 10;
constexpr std::size_t kLightningSkipEnd = 1;
// fastai's Learner.lr_find: its rules skip the first tenth of the requested steps and the last 5.
constexpr std::size_t kFastaiSkipEnd = 5;

/// One optimizer step of the sweep.
struct SweepPoint {
  int64_t step = 0;     ///< 1-based optimizer step
  double lr = 0.0;      ///< the lr it trained with (optim.lr's)
  double loss = 0.0;    ///< its training loss (NaN when not finite)
  double smoothed = 0.0;
};

/// Follows a history.jsonl another process appends to: each poll() returns the step records
/// completed since the previous one (a line without its newline yet waits for the next poll).
class HistoryFollower {
 public:
  explicit HistoryFollower(fs::path file) : file_(std::move(file)) {}

  /// (step, train/loss) of each new step record. Throws tp::Error naming the file for a line
  /// that does not parse.
  std::vector<std::pair<int64_t, double>> poll() {
    std::ifstream in(file_, std::ios::binary);
    if (!in) return {}; // not written yet
    in.seekg(offset_);
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset_ += static_cast<std::streamoff>(chunk.size());
    pending_ += chunk;
    std::vector<std::pair<int64_t, double>> steps;
    std::size_t start = 0;
    for (std::size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
      const std::string_view line(pending_.data() + start, end - start);
      if (line.empty()) continue;
      HistoryRecord record;
      try {
        record = parse_history_line(line);
      } catch (const Error& e) {
        throw Error("host tune lr: the sweep's history " + file_.string() + " has a line that does not parse (" +
                    e.what() + "). It is a throwaway run's file; run the tune again.");
      }
      if (record.kind != "step") continue;
      double step = std::nan(""), loss = std::nan("");
      for (const auto& [name, value] : record.values) {
        if (name == "step") step = value;
        if (name == "train/loss") loss = value;
      }
      if (std::isfinite(step)) steps.emplace_back(static_cast<int64_t>(step), loss);
    }
    pending_.erase(0, start);
    return steps;
  }

 private:
  fs::path file_;
  std::streamoff offset_ = 0;
  std::string pending_;
};

/// The sweep as it arrives: smoothing, divergence, progress lines.
class Sweep {
 public:
  Sweep(double min_lr, double max_lr, int64_t steps) : min_lr_(min_lr), max_lr_(max_lr), steps_(steps) {}

  /// Takes new (step, loss) records; returns true once the sweep has diverged (later records
  /// are then ignored).
  bool take(const std::vector<std::pair<int64_t, double>>& records) {
    for (const auto& [step, loss] : records) {
      if (diverged_ || step != static_cast<int64_t>(points_.size()) + 1) continue; // in order, once
      SweepPoint p{step, range_test_lr(min_lr_, max_lr_, steps_, step - 1), loss, 0.0};
      p.smoothed = smoother_.add(loss);
      points_.push_back(p);
      if (smoother_.diverged()) {
        diverged_ = true;
        std::fprintf(stderr, "host tune lr: stopped at step %lld (lr %.2e): %s\n", static_cast<long long>(step), p.lr,
                     std::isfinite(p.smoothed)
                         ? ("the smoothed loss " + short_number(p.smoothed) + " is above " +
                            short_number(kStopFactor) + " x the best " + short_number(smoother_.best()) +
                            ", so the loss diverged")
                               .c_str()
                         : "the loss is not finite, so the sweep diverged");
      } else if (step % std::max<int64_t>(1, steps_ / 10) == 0) {
        std::fprintf(stderr, "host tune lr: step %lld/%lld lr %.2e loss %.4g smoothed %.4g\n",
                     static_cast<long long>(step), static_cast<long long>(steps_), p.lr, loss, p.smoothed);
      }
    }
    return diverged_;
  }

  const std::vector<SweepPoint>& points() const noexcept { return points_; }
  bool diverged() const noexcept { return diverged_; }

 private:
  double min_lr_;
  double max_lr_;
  int64_t steps_;
  LossSmoother smoother_{kBeta, kStopFactor};
  std::vector<SweepPoint> points_;
  bool diverged_ = false;
};

/// A TOML float for --set: 10 -> "10.0", 1e-07 stays.
std::string toml_float(double value) {
  std::string text = format_number(value);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::vector<std::string> sweep_settings(const Options& o) {
  std::vector<std::string> sets{"schedule.name=\"range_test\"",
          "schedule.interval=\"step\"", // the range test moves the lr every step
          "schedule.min_lr=" + toml_float(o.min_lr),
          "schedule.max_lr=" + toml_float(o.max_lr),
          "train.max_steps=" + std::to_string(o.steps),
          "train.log_every_steps=1",
          "train.nan_policy=\"skip\"",
          "train.fast_dev_run=false",
          "train.max_time=\"\"",
          "eval.strategy=\"no\"",
          "early_stopping.patience=0",
          "checkpoint.strategy=\"no\"",
          "checkpoint.load_best_at_end=false",
          "ema.enabled=false",
          "swa.enabled=false",
          "plots.enabled=false",
          "logging.tensorboard=false",
          "progress.mode=\"off\""};
  // The run's warm-up and decay shape belong to its own schedule, which range_test refuses (a
  // recipe with timm's warmup_epochs could not be swept).
  for (std::string& set : schedule_reset_sets()) sets.push_back(std::move(set));
  return sets;
}

/// <run dir>/tune/lr_find.csv and lr_find.png; `lrs` and `smoothed` are the points' columns.
void write_outputs(const fs::path& tune_dir, const std::vector<SweepPoint>& points, const std::vector<double>& lrs,
                   const std::vector<double>& smoothed, std::optional<std::size_t> best, const std::string& label) {
  std::string csv = "step,lr,loss,smoothed_loss,suggested\n";
  for (std::size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    csv += std::to_string(p.step) + "," + format_number(p.lr) + "," + format_number(p.loss) + "," +
           format_number(p.smoothed) + "," + (best == i ? "1" : "0") + "\n";
  }
  write_file_atomically(tune_dir / "lr_find.csv", csv);
  try {
    draw_lr_find_plot(tune_dir / "lr_find.png", lrs, smoothed, best, label);
  } catch (const Error& e) {
    // The numbers are the result; a missing cairo driver must not hide them.
    std::fprintf(stderr, "host tune lr: lr_find.png was not drawn: %s\n", e.what());
  }
}

}  // namespace

int run_tune_lr(const Options& options) {
  // First: a Ctrl-C while the plugins load then stops the tune before it has written anything.
  SignalForwarder signals;
  const std::vector<std::string> settings = sweep_settings(options);
  const auto session = open_tune_session(options, settings, "host tune lr");
  if (const int signal = signals.received()) return stopped_before_start("host tune lr", signal);
  const RunConfig& config = session->config;
  const bool one_cycle = config.schedule.name == "one_cycle";
  ScratchDir scratch(session->run_dir, "lr");
  const fs::path output = scratch.path() / "output.log";
  std::fprintf(stderr,
               "host tune lr: sweeping the lr from %s to %s over %lld optimizer steps of batch %lld x %lld, a "
               "throwaway run in %s (its output: %s)\n",
               format_number(options.min_lr).c_str(), format_number(options.max_lr).c_str(),
               static_cast<long long>(options.steps), static_cast<long long>(config.train.batch_size),
               static_cast<long long>(config.train.grad_accum_steps), scratch.path().c_str(), output.c_str());
  std::fflush(stderr);

  Sweep sweep(options.min_lr, options.max_lr, options.steps);
  HistoryFollower history(scratch.path() / "history.jsonl");
  ChildOptions child;
  child.output = output;
  child.watch = [&](pid_t) { return sweep.take(history.poll()) ? SIGTERM : 0; };
  const ChildExit exit = signals.run(child_train_command(options, settings, scratch.path()), child);
  if (exit.forwarded_signal != 0) {
    scratch.discard();
    std::fprintf(stderr, "host tune lr: stopped by signal %d; the sweep was discarded and %s is as it was.\n",
                 exit.forwarded_signal, session->run_dir.c_str());
    return exit_code_for_signal(exit.forwarded_signal);
  }
  if (exit.watch_signal == 0 && exit.exit_code != kExitOk) {
    std::fprintf(stderr, "host tune lr: the sweep's training run failed with exit code %d; the end of %s:\n%s",
                 exit.exit_code, output.c_str(), tail_of(output, 15).c_str());
    return exit.exit_code;
  }
  sweep.take(history.poll()); // the records written after the last poll
  std::error_code ec;
  fs::remove_all(scratch.path() / "checkpoints", ec); // the save of the SIGTERM that stopped it
  const std::vector<SweepPoint>& points = sweep.points();
  if (points.empty())
    throw Error("host tune lr: the sweep's training run recorded no step in " +
                (scratch.path() / "history.jsonl").string() + "; its output is " + output.string() + ".");

  std::vector<double> lrs, smoothed;
  for (const SweepPoint& p : points) {
    lrs.push_back(p.lr);
    smoothed.push_back(p.smoothed);
  }
  const auto skip_begin = static_cast<std::size_t>(options.steps / 10);
  const std::optional<std::size_t> best = longest_valley(smoothed, skip_begin, kFastaiSkipEnd);
  const std::string label = best ? "suggested lr " + short_float(points[*best].lr) : "";
  write_outputs(session->run_dir / "tune", points, lrs, smoothed, best, label);
  const char* ending = "";
  if (sweep.diverged()) ending = " (stopped: the loss diverged)";
  else if (static_cast<int64_t>(points.size()) < options.steps)
    ending = " (the training run ended before the sweep did; its output.log says why)";
  std::printf("lr range test: %zu steps from %s to %s%s\n", points.size(), format_number(options.min_lr).c_str(),
              format_number(points.back().lr).c_str(), ending);
  if (!best) {
    std::printf("no suggestion: %zu points leave none with a finite loss once the first %zu and the last %zu are "
                "skipped. Raise --steps, or lower --max-lr if the loss diverged early.\n",
                points.size(), skip_begin, kFastaiSkipEnd);
  } else {
    std::printf("suggested lr %s at step %lld (fastai's \"valley\" rule: two thirds of the way down the longest "
                "descent of the smoothed loss, skipping the first %zu and the last %zu points)\n",
                short_float(points[*best].lr).c_str(), static_cast<long long>(points[*best].step), skip_begin,
                kFastaiSkipEnd);
    if (one_cycle) {
      std::printf("[schedule] is one_cycle, which replaces optim.lr with schedule.max_lr (its peak): set that\n");
      std::printf("  --set schedule.max_lr=%s\n", short_float(points[*best].lr).c_str());
    } else {
      std::printf("  --set optim.lr=%s\n", short_float(points[*best].lr).c_str());
    }
  }
  // The other rules, for a look at lr_find.png: both missed on our configs (docs/tune.md, "Which
  // rule, and why"), Lightning's by picking noise where the lr steps are tiny.
  const std::optional<std::size_t> lowest = lowest_loss(smoothed, skip_begin, kFastaiSkipEnd);
  std::vector<double> losses;
  for (const SweepPoint& p : points) losses.push_back(p.loss);
  // Lightning's rule on Lightning's own smoothing of the losses: the step its suggestion() gives.
  const std::optional<std::size_t> steepest =
      steepest_descent(lrs, lightning_smoothed(losses), kLightningSkipBegin, kLightningSkipEnd);
  if (lowest || steepest) {
    std::printf("for reference, not the rule:");
    if (lowest)
      std::printf(" the smoothed loss was lowest (%.4g) at lr %s, a tenth of which is %s (fastai's \"minimum\");",
                  points[*lowest].smoothed, short_float(points[*lowest].lr).c_str(),
                  short_float(points[*lowest].lr / 10).c_str());
    if (steepest)
      std::printf(" Lightning's smoothed loss fell fastest against the lr at lr %s, step %lld (Lightning's rule);",
                  short_float(points[*steepest].lr).c_str(), static_cast<long long>(points[*steepest].step));
    std::printf(" check lr_find.png before pasting.\n");
  }
  std::printf("wrote %s and %s\n", (session->run_dir / "tune" / "lr_find.csv").c_str(),
              (session->run_dir / "tune" / "lr_find.png").c_str());
  return kExitOk;
}

}  // namespace tp::cli
