// The options of a learning-rate schedule, as a plain struct without LibTorch, so that the
// config layer (tp_config, built without LibTorch for the fuzzers) can fill it from [schedule]
// and the schedules (optim/lr_scheduler.h) can read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp {

/// Options of every schedule, one field per `[schedule]` key (docs/schedules.md), named as the
/// key. The config layer reads `[schedule]` straight into this struct (RunConfig::schedule), so a
/// new schedule option is one field here plus one row in config/host_keys.cpp. A list field ("one
/// value or per group") holds either one value for all parameter groups or exactly one value per
/// group; the [schedule] keys give one value.
///
/// The initializers are the defaults for direct use of make_scheduler() and equal PyTorch's. They
/// equal the [schedule] key defaults except where PyTorch has none: `max_lr` (the key's 0 means
/// optim.lr, resolved per group by the trainer) and `gamma` (the key defaults to 0.1);
/// host_keys_test checks that.
struct SchedulerOptions {
  /// constant | step | multistep | exponential | linear | cosine | polynomial | one_cycle |
  /// reduce_on_plateau | range_test (the lr range test's sweep from min_lr to max_lr; `host tune lr`).
  std::string name = "constant";

  /// step | epoch: when the lr changes. "step": after every optimizer step, the schedule's time
  /// counted in optimizer steps. "epoch": only at epoch boundaries (every step of epoch e trains
  /// at the schedule's value for e), its time counted in epochs, as Lightning's
  /// interval="epoch" and timm's default stepping; step_size and milestones then count epochs.
  std::string interval = "step";

  /* Warmup schedules (linear, cosine) */
  /// Steps of linear warmup from `warmup_start_factor` × base lr up to the base lr. Refused with
  /// interval "epoch", whose warm-up is `warmup_epochs`.
  int64_t warmup_steps = 0;
  /// Epochs of linear warmup (timm's --warmup-epochs): warmup_epochs × steps per epoch optimizer
  /// steps with interval "step", warmup_epochs lr values with interval "epoch". Exclusive with
  /// warmup_steps.
  int64_t warmup_epochs = 0;
  /// Warmup starts at this fraction of the base lr, in [0, 1]. 0 (Hugging Face) wastes step 0.
  double warmup_start_factor = 0.0;
  /// Absolute lr the warmup starts at (timm's --warmup-lr); 0 = use warmup_start_factor, which
  /// it excludes. It is optim.lr's (group 0's for make_scheduler used directly): each group
  /// starts at warmup_lr / optim.lr × its lr, as timm's lr_scale scales it.
  double warmup_lr = 0.0;
  /// true: the decay starts after the warmup (Hugging Face; timm --warmup-prefix). false: the
  /// warmup replaces the decay's first steps, which then continues where a decay from step 0
  /// would be (timm's default).
  bool warmup_prefix = true;
  /// Epochs at min_lr at the end of the run (timm's --cooldown-epochs): the decay ends that many
  /// epochs before the run does.
  int64_t cooldown_epochs = 0;
  /// linear, cosine: the lr reached at the last step; reduce_on_plateau: the lower bound;
  /// range_test: the lr of step 0. Absolute, one value or per group.
  std::vector<double> min_lr{0.0};

  /* polynomial (PolynomialLR) */
  /// The decay's exponent: lr = min_lr + (base − min_lr) × (1 − t / total_iters)^power. PyTorch's
  /// default 1.0; torchvision's segmentation reference uses 0.9.
  double power = 1.0;
  /// Steps (epochs with interval "epoch") the decay takes, counted from its start (after a
  /// prefixed warm-up); held at min_lr after. 0: until the run's end (less cooldown_epochs).
  /// PyTorch's default of 5 would end a real run's decay almost at once, hence the run's length.
  int64_t total_iters = 0;

  /* one_cycle */
  /// Peak lr, one value or per group. Required for one_cycle (the optimizer's lr is ignored) and
  /// range_test (the lr of its last step).
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
  /// step: decay every `step_size` steps (epochs with interval "epoch"). Required (PyTorch has
  /// no default).
  int64_t step_size = 0;
  /// Decay factor. step/multistep default to 0.1; exponential requires it (no PyTorch default).
  std::optional<double> gamma;
  /// multistep: steps (epochs with interval "epoch") at which to decay; a step listed n times
  /// decays by gamma^n.
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
  /// The evaluated value ("val/loss") the trainer passes to step_metric() after each evaluation;
  /// the schedule itself never reads it.
  std::string monitor = "val/loss";

  bool operator==(const SchedulerOptions&) const = default; ///< field-wise
};

}  // namespace tp
