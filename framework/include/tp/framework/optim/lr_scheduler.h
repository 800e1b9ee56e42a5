// Learning-rate schedules over a torch::optim::Optimizer, counted in optimizer steps.
//
// Time is the number of optimizer updates, not batches, micro-batches or per-process counts:
// with gradient accumulation one step covers `grad_accum_steps` batches, and under DDP every
// rank takes the same steps. `total_optimizer_steps()` turns epochs into that count, and a
// OneCycle schedule that is stepped more often than that fails loudly instead of drifting
// (ARCH-10). With SchedulerOptions::interval "epoch" the same schedules count epochs and change
// the lr once every steps-per-epoch step() calls (make_scheduler's steps_per_epoch).
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
#include <string>
#include <vector>

#include "tp/framework/optim/scheduler_options.h"

namespace torch::optim {
class Optimizer;
}

namespace tp {

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
/// `total_optimizer_steps`); linear, cosine, polynomial and one_cycle need it > 0, range_test >= 2, the others
/// ignore it. `steps_per_epoch` (total_optimizer_steps(1, ...)) is needed, > 0, only by what counts
/// epochs: interval "epoch" (the schedule then runs over ceil(total_steps / steps_per_epoch)
/// epochs and its step() changes the lr every steps_per_epoch calls), warmup_epochs and
/// cooldown_epochs; 0 means unknown.
/// Throws ConfigError with the key path ("schedule.max_lr") for invalid options.
std::unique_ptr<LrScheduler> make_scheduler(const SchedulerOptions& options,
                                            torch::optim::Optimizer& optimizer,
                                            int64_t total_steps, int64_t steps_per_epoch = 0);

/// One line for the run's log: the schedule, its length in its own unit and in optimizer steps,
/// and its warm-up and cool-down. Example: "cosine per epoch over 3 epochs (9 optimizer steps, 3
/// per epoch); warm-up 1 epoch under the decay".
std::string describe_schedule(const SchedulerOptions& options, int64_t total_steps, int64_t steps_per_epoch);

/// train.fast_dev_run's one step: a warm-up or cool-down longer than `total_steps` (a real run's
/// 5 warm-up epochs) is capped so the smoke run is not refused, and an epoch interval becomes a
/// step one. Returns what it changed, for a warning; "" when nothing.
std::string fit_schedule_to_smoke_run(SchedulerOptions& options, int64_t total_steps, int64_t steps_per_epoch);

/// `options` fitted to `optimizer`'s parameter groups ([[optim.param_groups]]), whose lrs are
/// optim.lr (`optim_lr`) scaled per group: one_cycle's max_lr (0: optim.lr) becomes one peak per
/// group in proportion to the group's lr, as passing a per-group max_lr list to
/// torch.optim.lr_scheduler.OneCycleLR does; range_test's bounds (min_lr, max_lr) are optim.lr's
/// and each group sweeps them scaled alike, exactly the given bounds for a group at optim.lr, as
/// `host tune lr` computes them. Other schedules take `options` as they are but for max_lr.
SchedulerOptions options_for_groups(SchedulerOptions options, const torch::optim::Optimizer& optimizer,
                                    double optim_lr);

/// What make_scheduler refuses whatever the run's length and parameter groups (an unknown name,
/// a step schedule without step_size, an exponential one without gamma, a bad bound), checked on
/// a one-parameter optimizer at `optim_lr` over a very long run: `host sweep` checks every cell
/// with it before any trains. Per-group lists and the checks against the run's length (a warm-up
/// longer than the run) wait for the data, in the run itself. Throws ConfigError as make_scheduler.
void check_schedule_options(SchedulerOptions options, double optim_lr);

/// --set pairs that turn every key only some schedules take back to its default: the warm-up and
/// cool-down keys (linear, cosine, polynomial) and the polynomial decay's power and total_iters.
/// For a command that runs the configuration under another schedule (host verify's constant lr,
/// host tune lr's range test): make_scheduler refuses those keys on the schedules that ignore them.
std::vector<std::string> schedule_reset_sets();

/// Whether the schedule writes the optimizer's momentum (beta1) between steps: one_cycle with
/// cycle_momentum, which a captured CUDA graph step would not see.
bool cycles_momentum(const SchedulerOptions& options);

/// SWALR (torch.optim.swa_utils.SWALR) over every group of `optimizer`, built when stochastic
/// weight averaging starts ([swa], docs/weight_averaging.md): from each group's lr at that moment
/// it anneals to `swa_lrs` (one value or one per group) over `anneal_epochs` calls of step(), by
/// cosine (`cosine`) or linearly, then holds it. Time is epochs: the trainer steps it once after
/// each averaged epoch. Like PyTorch's it is recursive in the groups' current lrs. Throws
/// ConfigError at `swa.lr` for a non-positive or mis-sized swa_lrs.
std::unique_ptr<LrScheduler> make_swa_scheduler(torch::optim::Optimizer& optimizer, const std::vector<double>& swa_lrs,
                                                int64_t anneal_epochs, bool cosine);

/// The lr that the range_test schedule sets for optimizer step `step` (0-based) of a sweep over
/// `total_steps` (>= 2) steps from `start` to `end`: start × (end / start)^(step / (total_steps − 1)),
/// exactly `start` at step 0 and exactly `end` from step total_steps − 1 on. `host tune lr` calls it
/// to know the lr of each step it reads back, whatever the parameter groups' scales.
/// Example: range_test_lr(1e-7, 10, 100, 33) == 1e-7 × 1e8^(33 / 99) ≈ 4.6e-5.
double range_test_lr(double start, double end, int64_t total_steps, int64_t step);

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
  kKindSwa = 9,
  kKindRangeTest = 10,
  kKindEpochInterval = 11,  ///< interval "epoch": the per-epoch schedule's state follows
  kKindPolynomial = 12,
};
/// The warm-up and cool-down of linear, cosine and polynomial in the schedule's own unit (optimizer steps, or
/// epochs under interval "epoch"), resolved by make_scheduler, and the names messages use.
struct Span {
  int64_t warmup = 0;
  int64_t cooldown = 0;
  const char* warmup_key = "warmup_steps";
  const char* unit = "optimizer steps";
};
/// make_scheduler for a schedule whose time is `total` units of `span.unit`, stepped once a unit.
std::unique_ptr<LrScheduler> make_counted(const SchedulerOptions& o, torch::optim::Optimizer& opt, int64_t total,
                                          const Span& span);
// One constructor per family file; make_scheduler dispatches to them after the shared checks.
std::unique_ptr<LrScheduler> make_one_cycle(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                            int64_t total_steps);
std::unique_ptr<LrScheduler> make_warmup_decay(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                               int64_t total_steps, const Span& span);
std::unique_ptr<LrScheduler> make_plateau(const SchedulerOptions& o, torch::optim::Optimizer& opt);
std::unique_ptr<LrScheduler> make_range_test(const SchedulerOptions& o, torch::optim::Optimizer& opt,
                                             int64_t total_steps);
/// Turns linear/cosine's absolute warmup_lr into warmup_start_factor = warmup_lr / `reference_lr`
/// (optim.lr, whose fraction every group starts at) and clears it. ConfigError at schedule.warmup_lr
/// when warmup_start_factor is set too or warmup_lr exceeds `reference_lr`.
void resolve_warmup_lr(SchedulerOptions& o, double reference_lr);
/// Throws ConfigError for key path `schedule.<key>`, message "schedule.<key>: <message>".
[[noreturn]] void config_fail(const char* key, const std::string& message);
/// Expands a "one value or per group" list to one value per group; ConfigError at `key`.
std::vector<double> per_group(const std::vector<double>& values, size_t groups, const char* key);
}  // namespace detail

}  // namespace tp
