// The training checks' tools: `host train` and `host eval` as child processes of this
// executable, with the user's command line (config, --set, --plugin-dir) and a check's own
// overrides, each writing its output to a log file beside its run directory; and the comparison
// of the weights two runs saved.
//
// Rationale: a child process trains exactly as `host train` would (the same Trainer, the same
// data-parallel launcher), gets a fresh LibTorch and plugin state, and cannot leave this
// process's generators or plugins changed for the next check. Each costs a process start and the
// plugin loading (about a second) besides its training steps.
#pragma once

#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cli.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"

namespace tp::cli::verify {

/// How a child ended and where its files are.
struct ChildResult {
  std::filesystem::path dir; ///< its --output-dir
  std::filesystem::path log; ///< its stdout and stderr
  int exit_code = 0;
  bool stopped = false;      ///< `stop_when` held, so this process sent it SIGTERM

  /// It finished, or it saved and exited 143 after the SIGTERM that `stop_when` asked for.
  bool ok() const noexcept { return exit_code == 0 || (stopped && exit_code == exit_code_for_signal(SIGTERM)); }
  /// "`host train` in DIR exited 2: <its last line>; its output is in LOG".
  std::string failure() const;
  /// The model weights of DIR/checkpoints/last.pt. Throws CheckpointError.
  NamedWeights last_weights() const;
};

class ChildRunner {
 public:
  /// Keeps `options` (borrowed): its config, --set, --plugin-dir go to every child.
  explicit ChildRunner(const Options& options) : options_(options) {}

  /// `host [--nproc-per-node ranks] train` into `dir` (created): the user's --set, then the
  /// quiet short-run overrides (no evaluation, plots, averages or early stopping; the loss logged
  /// every step), then `sets`; with `resume`, `--resume resume`. Output to `dir`.log. While it
  /// runs, `stop_when` (if set) is asked about every 0.1 s; once it returns true the child gets
  /// SIGTERM, saves and exits (the overfit check stops at its target instead of its budget).
  ChildResult train(const std::filesystem::path& dir, const std::vector<std::string>& sets, int ranks = 1,
                    const std::filesystem::path& resume = {}, const std::function<bool()>& stop_when = {}) const;
  /// `host [--nproc-per-node ranks] eval --checkpoint checkpoint` into `dir` (created): it writes
  /// DIR/eval_<checkpoint stem>.json. `sets` follow the user's.
  ChildResult eval(const std::filesystem::path& dir, const std::filesystem::path& checkpoint,
                   const std::vector<std::string>& sets, int ranks = 1) const;

 private:
  ChildResult run(const std::string& command, const std::filesystem::path& dir, std::vector<std::string> extra,
                  int ranks, const std::function<bool()>& stop_when = {}) const;
  const Options& options_;
};

/// How far two sets of weights are apart.
struct WeightDifference {
  double relative = 0.0; ///< max over floating tensors of max|a - b| / max|a| (with `initial`, for a
                         ///< tensor that starts at zero: / max(max|a|, the largest change of any tensor))
  std::string worst;     ///< the tensor where `relative` is largest
  double moved = 0.0;    ///< max over floating tensors not initialised to zero of max|a - initial| / max|a|
                         ///< (0 without `initial`)
  int64_t differing = 0; ///< tensors that are not equal element for element
  int64_t tensors = 0;
};

/// Compares `a` and `b` entry by entry, and `a` with `initial` when given: how far training moved
/// the weights bounds what a comparison can see (a gradient wrong by a fraction f shows as about
/// f x moved). Throws tp::Error when names, order or shapes differ.
WeightDifference compare_weights(const NamedWeights& a, const NamedWeights& b, const NamedWeights* initial = nullptr);

/// "; the weights moved 0.0021 from their initial values" for a row's reason, with a warning
/// when they moved so little that a comparison could hardly see a wrong gradient.
std::string moved_note(const WeightDifference& difference);

/// The --set values that make a training check's runs use plain SGD (no momentum, no weight
/// decay, constant lr) at the config's lr. The comparisons are about gradients; an adaptive
/// optimizer divides each gradient by its own running size, which turns float32 rounding of
/// near-zero gradients into visible weight differences (AdamW on quickstart: 2.7e-4 after 2
/// steps) and hides a uniformly scaled gradient (a loss returning a mean).
std::vector<std::string> plain_sgd_sets();
/// --set pairs that put the warm-up and cool-down keys counted in epochs (schedule.warmup_epochs,
/// warmup_lr, warmup_prefix, cooldown_epochs) back to their defaults: a check that runs a few
/// steps would be refused over keys only a longer run takes (fine-tune trial F1: a timm-mapped
/// config failed verify).
std::vector<std::string> epoch_warmup_reset_sets();
/// --set pairs that run at the config's lr throughout: schedule.name = "constant", and every
/// key that only some schedules take reset (schedule_reset_sets()).
std::vector<std::string> constant_schedule_sets();

/// Whether `weights` hold BatchNorm running statistics (is_batchnorm_statistic): then the batch
/// a sample is in changes its normalisation, and batch-splitting comparisons differ by design.
bool has_batchnorm_statistics(const NamedWeights& weights);

/// The "name": number pairs of a JSON object written by `host eval` (eval_*.json).
std::vector<std::pair<std::string, double>> read_eval_values(const std::filesystem::path& file);

}  // namespace tp::cli::verify
