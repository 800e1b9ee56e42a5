// Learning-rate schedules over a torch::optim::Optimizer, counted in optimizer steps.
//
// Time is the number of optimizer updates, not batches, micro-batches or per-process counts:
// with gradient accumulation one step covers `grad_accum_steps` batches, and under DDP every
// rank takes the same steps. `total_optimizer_steps()` turns epochs into that count, and a
// OneCycle schedule that is stepped more often than that fails loudly instead of drifting
// (ARCH-10).
//
// Each schedule reproduces its `torch.optim.lr_scheduler` counterpart value for value,
// including the boundary quirks (docs/schedules.md lists them); the unit tests run PyTorch
// as an oracle. Lifecycle, as in PyTorch: constructing a schedule sets the lr of step 0 on
// every parameter group; the trainer calls `step()` once after each `optimizer.step()`.
//
// Example:
//   auto sched = tp::make_scheduler(opts, *optimizer,
//                                   tp::total_optimizer_steps(epochs, loader.size(), accum));
//   for (...) {            // one optimizer step
//     optimizer->step();
//     sched->step();       // lr for the next optimizer step
//   }
//   sched->step_metric(val_loss);   // after an evaluation; only reduce_on_plateau uses it
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace tp {

/// Options of every schedule, one field per `[schedule]` key (docs/schedules.md). Defaults
/// equal PyTorch's. A list field ("one value or per group") holds either one value for all
/// parameter groups or exactly one value per group.
struct SchedulerOptions {
  /// constant | step | multistep | exponential | linear | cosine | one_cycle | reduce_on_plateau.
  std::string name = "constant";

  /* Warmup schedules (linear, cosine) */
  /// Steps of linear warmup from `warmup_start_factor` × base lr up to the base lr.
  int64_t warmup_steps = 0;
  /// Warmup starts at this fraction of the base lr, in [0, 1]. 0 (Hugging Face) wastes step 0.
  double warmup_start_factor = 0.0;
  /// linear, cosine: the lr reached at the last step; reduce_on_plateau: the lower bound.
  /// Absolute, one value or per group.
  std::vector<double> min_lr{0.0};

  /* one_cycle */
  /// Peak lr, one value or per group. Required for one_cycle; the optimizer's lr is ignored.
  std::vector<double> max_lr;
  /// Fraction of the steps spent raising the lr.
  double pct_start = 0.3;
  /// cos | linear.
  std::string anneal_strategy = "cos";
  /// Fall back to initial_lr symmetrically, then anneal to min in a third phase.
  bool three_phase = false;
  /// initial_lr = max_lr / div_factor.
  double div_factor = 25.0;
  /// final lr = initial_lr / final_div_factor.
  double final_div_factor = 1e4;
  /// Cycle SGD/RMSprop `momentum` or Adam/AdamW `beta1` inversely to the lr.
  bool cycle_momentum = true;
  /// Momentum at the lr peak, one value or per group.
  std::vector<double> base_momentum{0.85};
  /// Momentum at the start and end, one value or per group.
  std::vector<double> max_momentum{0.95};

  /* step, multistep, exponential */
  /// step: decay every `step_size` steps. Required (PyTorch has no default).
  int64_t step_size = 0;
  /// Decay factor. step/multistep default to 0.1; exponential requires it (no PyTorch default).
  std::optional<double> gamma;
  /// multistep: steps at which to decay; a step listed n times decays by gamma^n.
  std::vector<int64_t> milestones;

  /* reduce_on_plateau */
  /// min | max: whether a lower or a higher metric is better.
  std::string mode = "min";
  /// new lr = lr × factor; must be < 1.
  double factor = 0.1;
  /// Evaluations without improvement tolerated before reducing.
  int64_t patience = 10;
  /// Minimum change that counts as an improvement.
  double threshold = 1e-4;
  /// rel | abs: whether `threshold` is relative to the best value or absolute.
  std::string threshold_mode = "rel";
  /// Evaluations to wait after a reduction before counting bad evaluations again.
  int64_t cooldown = 0;
  /// Reductions smaller than this are skipped.
  double eps = 1e-8;
};

/// A learning-rate schedule bound to one optimizer. The optimizer must outlive it and must
/// keep the number of parameter groups it had at construction. Not thread-safe; [main].
class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  LrScheduler(const LrScheduler&) = delete;  // bound to one optimizer's groups
  LrScheduler& operator=(const LrScheduler&) = delete;

  /// Advances one optimizer step and sets the lr (and cycled momentum) of every group for the
  /// next one. Call after `optimizer.step()`. Throws tp::Error, changing nothing, when a
  /// one_cycle schedule is stepped past its total.
  virtual void step();
  /// Reports an evaluation result; reduce_on_plateau may lower the lr, others ignore it.
  virtual void step_metric(double /*value*/) {}

  /// The lr of parameter group 0, as set in the optimizer.
  double lr() const;
  /// The lr of every parameter group, in group order.
  std::vector<double> lrs() const;
  /// Number of `step()` calls so far (0 after construction).
  int64_t steps_taken() const noexcept { return steps_; }
  /// The schedule's `SchedulerOptions::name`.
  const std::string& name() const noexcept { return name_; }

  /// Everything needed to continue exactly where this schedule is: format version, kind,
  /// group count, total steps, step count, current lrs, then kind-specific counters. Plain
  /// doubles (integers below 2^53 are exact), so a checkpoint can store it as a float64 tensor.
  std::vector<double> state() const;
  /// Restores `state()` from a schedule built with the same options, and re-applies its lrs
  /// (and momentum) to the optimizer, so the order against `optimizer.load()` does not matter.
  /// Throws tp::Error when the state comes from another kind, group count or total steps.
  void load_state(const std::vector<double>& state);

 protected:
  /// The lrs, and momenta when cycled (else empty), that one step sets.
  struct Values {
    std::vector<double> lrs;
    std::vector<double> momenta;
  };

  /// Records the base lrs (the groups' current lrs) and the group count. Subclasses call
  /// `start()` at the end of their constructor.
  LrScheduler(torch::optim::Optimizer& optimizer, std::string name, int kind, int64_t total_steps);
  /// Sets the values of step 0, as PyTorch's constructor does.
  void start();
  /// The values for step `step`, computed from the optimizer's current state where the
  /// PyTorch class is recursive. Must not change anything: `step()` may still abort.
  virtual Values values_at(int64_t step) = 0;
  /// Kind-specific counters appended to / read back from `state()`.
  virtual void save_extra(std::vector<double>& /*out*/) const {}
  virtual void load_extra(const double* /*extra*/, size_t /*count*/) {}
  /// Number of doubles `load_extra` expects.
  virtual size_t extra_size() const { return 0; }

  /// Writes lrs (and momenta, when non-empty, through `apply_momenta`) to the optimizer's groups.
  void apply(const Values& values);
  /// Writes one momentum per group; only schedules that cycle momentum return momenta.
  virtual void apply_momenta(const std::vector<double>& /*momenta*/) {}
  /// Number of parameter groups; throws if the optimizer's count changed.
  size_t group_count() const;

  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;  ///< group lrs at construction (PyTorch's `initial_lr`)
  int64_t total_steps_;
  int64_t steps_ = 0;

 private:
  std::string name_;
  int kind_;
};

/// Builds the schedule `options.name` over every group of `optimizer` and sets the lr of
/// step 0. `total_steps` is the number of optimizer steps of the whole run (see
/// `total_optimizer_steps`); linear, cosine and one_cycle need it > 0, the others ignore it.
/// Throws ConfigError with the key path ("schedule.max_lr") for invalid options.
std::unique_ptr<LrScheduler> make_scheduler(const SchedulerOptions& options,
                                            torch::optim::Optimizer& optimizer,
                                            int64_t total_steps);

/// Optimizer steps in a run: epochs × ceil(batches_per_epoch_per_rank / grad_accum_steps).
/// The short last accumulation window of an epoch counts as a step (the trainer steps the
/// optimizer at epoch end), and batches are per rank (a DistributedSampler shard), because
/// every rank takes the same optimizer steps. Throws tp::Error for a negative count, for
/// grad_accum_steps < 1, or on overflow.
/// Example: 10 epochs × 37 batches with grad_accum_steps 4 -> 10 × 10 = 100 steps.
int64_t total_optimizer_steps(int64_t epochs, int64_t batches_per_epoch_per_rank,
                              int64_t grad_accum_steps);

namespace detail {
/// Kind codes stored in `state()`; append only, so old checkpoints keep their meaning.
enum SchedulerKind : int {
  kKindConstant = 1,
  kKindStep = 2,
  kKindMultiStep = 3,
  kKindExponential = 4,
  kKindLinear = 5,
  kKindCosine = 6,
  kKindOneCycle = 7,
  kKindPlateau = 8,
};
// One constructor per family file; make_scheduler dispatches to them after the shared checks.
std::unique_ptr<LrScheduler> make_one_cycle(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                            int64_t total_steps);
std::unique_ptr<LrScheduler> make_warmup_decay(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                               int64_t total_steps);
std::unique_ptr<LrScheduler> make_plateau(const SchedulerOptions& o, torch::optim::Optimizer& opt);
/// Throws ConfigError for key path `schedule.<key>`, message "schedule.<key>: <message>".
[[noreturn]] void config_fail(const char* key, const std::string& message);
/// Expands a "one value or per group" list to one value per group; ConfigError at `key`.
std::vector<double> per_group(const std::vector<double>& values, size_t groups, const char* key);
}  // namespace detail

}  // namespace tp
