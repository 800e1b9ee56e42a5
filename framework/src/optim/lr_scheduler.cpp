// LrScheduler's shared machinery (group access, state), the factory, the step-count helper and
// the multiplicative schedules (constant, step, multistep, exponential).
#include "tp/framework/optim/lr_scheduler.h"

#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <map>

#include "tp/framework/error.h"

namespace tp {
namespace {

// state() layout: the header, then one lr per group, then the kind's extras.
constexpr double kStateFormat = 1;
constexpr size_t kHeaderSize = 5;  // format, kind, groups, total_steps, steps

std::string schedule_key(const char* key) { return std::string("schedule.") + key; }

// ~~~~ constant ~~~~

// Leaves the lr alone; exists so every run has a schedule and a checkpointed step count.
class ConstantSchedule : public LrScheduler {
 public:
  explicit ConstantSchedule(torch::optim::Optimizer& opt) : LrScheduler(opt, "constant", detail::kKindConstant, 0) {
    start();
  }

 protected:
  Values values_at(int64_t) override { return {lrs(), {}}; }
};

// ~~~~ step, multistep, exponential ~~~~
// These are recursive in PyTorch: each step multiplies the group's *current* lr, so another
// writer's change to the lr carries forward, and the rounding is that of repeated
// multiplication rather than of base × gamma^k. We read the optimizer's lr for the same result.

class StepSchedule : public LrScheduler {
 public:
  StepSchedule(torch::optim::Optimizer& opt, int64_t step_size, double gamma)
      : LrScheduler(opt, "step", detail::kKindStep, 0), step_size_(step_size), gamma_(gamma) {
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    auto current = lrs();
    // StepLR: no decay at step 0, then at every multiple of step_size.
    if (step == 0 || step % step_size_ != 0) return {current, {}};
    for (double& lr : current) lr *= gamma_;
    return {current, {}};
  }

 private:
  int64_t step_size_;
  double gamma_;
};

class MultiStepSchedule : public LrScheduler {
 public:
  MultiStepSchedule(torch::optim::Optimizer& opt, const std::vector<int64_t>& milestones, double gamma)
      : LrScheduler(opt, "multistep", detail::kKindMultiStep, 0), gamma_(gamma) {
    // MultiStepLR keeps a Counter: order does not matter and duplicates multiply.
    for (int64_t m : milestones) ++milestones_[m];
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    auto current = lrs();
    auto hit = milestones_.find(step);
    // No step-0 exemption in MultiStepLR: a milestone 0 decays at construction.
    if (hit == milestones_.end()) return {current, {}};
    // gamma ** n in Python is C pow(); pow(g, 1) == g exactly, as for a single milestone.
    const double decay = std::pow(gamma_, static_cast<double>(hit->second));
    for (double& lr : current) lr *= decay;
    return {current, {}};
  }

 private:
  std::map<int64_t, int64_t> milestones_;
  double gamma_;
};

class ExponentialSchedule : public LrScheduler {
 public:
  ExponentialSchedule(torch::optim::Optimizer& opt, double gamma)
      : LrScheduler(opt, "exponential", detail::kKindExponential, 0), gamma_(gamma) {
    start();
  }

 protected:
  Values values_at(int64_t step) override {
    auto current = lrs();
    if (step == 0) return {current, {}};  // ExponentialLR's initial step keeps the lr
    for (double& lr : current) lr *= gamma_;
    return {current, {}};
  }

 private:
  double gamma_;
};

}  // namespace

// ~~~~ LrScheduler ~~~~

LrScheduler::LrScheduler(torch::optim::Optimizer& optimizer, std::string name, int kind, int64_t total_steps)
    : optimizer_(optimizer), total_steps_(total_steps), name_(std::move(name)), kind_(kind) {
  TP_CHECK(!optimizer.param_groups().empty(), "schedule '", name_, "': the optimizer has no parameter groups.");
  base_lrs_ = lrs();
}

void LrScheduler::start() { apply(values_at(0)); }

void LrScheduler::step() {
  // Compute before counting, so a refused step (one_cycle overrun) leaves everything as it was.
  Values next = values_at(steps_ + 1);
  ++steps_;
  apply(next);
}

double LrScheduler::lr() const { return optimizer_.param_groups().front().options().get_lr(); }

std::vector<double> LrScheduler::lrs() const {
  std::vector<double> out;
  out.reserve(optimizer_.param_groups().size());
  for (const auto& group : optimizer_.param_groups()) out.push_back(group.options().get_lr());
  return out;
}

size_t LrScheduler::group_count() const {
  const size_t now = optimizer_.param_groups().size();
  TP_CHECK(now == base_lrs_.size(), "schedule '", name_, "' was built for ", base_lrs_.size(),
           " parameter groups but the optimizer now has ", now,
           "; build the schedule after the last add_param_group().");
  return now;
}

void LrScheduler::apply(const Values& values) {
  const size_t groups = group_count();
  for (size_t i = 0; i < groups; ++i) optimizer_.param_groups()[i].options().set_lr(values.lrs.at(i));
  if (!values.momenta.empty()) apply_momenta(values.momenta);
}

std::vector<double> LrScheduler::state() const {
  std::vector<double> out{kStateFormat, static_cast<double>(kind_), static_cast<double>(group_count()),
                          static_cast<double>(total_steps_), static_cast<double>(steps_)};
  for (double lr : lrs()) out.push_back(lr);
  save_extra(out);
  return out;
}

void LrScheduler::load_state(const std::vector<double>& state) {
  const size_t groups = group_count();
  TP_CHECK(state.size() >= kHeaderSize && state[0] == kStateFormat, "schedule '", name_,
           "': the saved scheduler state is not in format ", kStateFormat, " (", state.size(), " values).");
  // What the configuration changed since the checkpoint: configuration errors (exit 2), as the
  // resume's other refusals of a changed setting are.
  constexpr double kPerEpoch = detail::kKindEpochInterval;
  if ((state[1] == kPerEpoch) != (kind_ == detail::kKindEpochInterval)) {
    const auto per = [](bool epoch) { return std::string(epoch ? "epoch (interval \"epoch\")" : "optimizer step (interval \"step\")"); };
    throw ConfigError("schedule.interval", "schedule.interval: the checkpoint's schedule changed the lr once per " +
                                               per(state[1] == kPerEpoch) + ", this run's once per " +
                                               per(kind_ == detail::kKindEpochInterval) +
                                               "; resume with the schedule.interval the checkpoint was made with.");
  }
  if (state[1] != kind_)
    throw ConfigError("schedule.name", "schedule '" + name_ + "': the checkpoint holds the state of another schedule kind (" +
                                           std::to_string(static_cast<int64_t>(state[1])) + ", this is " + std::to_string(kind_) +
                                           "); resume with the [schedule] the checkpoint was made with.");
  TP_CHECK(state[2] == static_cast<double>(groups), "schedule '", name_, "': the checkpoint has ", state[2],
           " parameter groups, the optimizer ", groups, ".");
  if (state[3] != static_cast<double>(total_steps_))
    throw ConfigError("train.epochs",
                      "schedule '" + name_ + "': the checkpoint's schedule spans " + std::to_string(static_cast<int64_t>(state[3])) +
                          " optimizer steps but this run computes " + std::to_string(total_steps_) +
                          " (epochs, batches per epoch or grad_accum_steps changed); the schedule would not continue the "
                          "same curve. Resume with the settings the checkpoint was made with; to train on from its "
                          "weights with a new schedule, start a new run from them: --output-dir NEW --set "
                          "train.init_weights=\"<the checkpoint>\" (the weights only: a fresh optimizer and schedule).");
  TP_CHECK(state.size() == kHeaderSize + groups + extra_size(), "schedule '", name_, "': the saved state has ",
           state.size(), " values, expected ", kHeaderSize + groups + extra_size(), ".");
  const double steps = state[4];
  TP_CHECK(steps >= 0 && steps == std::floor(steps), "schedule '", name_, "': invalid saved step count ", steps, ".");
  steps_ = static_cast<int64_t>(steps);
  Values saved;
  saved.lrs.assign(state.begin() + kHeaderSize, state.begin() + static_cast<std::ptrdiff_t>(kHeaderSize + groups));
  // The saved lrs, not a recomputation: the recursive schedules depend on their history.
  apply(saved);
  load_extra(state.data() + kHeaderSize + groups, extra_size());
}

// ~~~~ factory ~~~~

void detail::config_fail(const char* key, const std::string& message) {
  throw ConfigError(schedule_key(key), schedule_key(key) + ": " + message);
}

std::vector<double> detail::per_group(const std::vector<double>& values, size_t groups, const char* key) {
  if (values.size() == 1) return std::vector<double>(groups, values.front());
  if (values.size() != groups)
    config_fail(key, concat("expected one value or one per parameter group (", groups, "), got ", values.size(), "."));
  return values;
}

SchedulerOptions options_for_groups(SchedulerOptions o, const torch::optim::Optimizer& optimizer, double optim_lr) {
  const double key_max_lr = o.max_lr.empty() ? 0.0 : o.max_lr.front();
  const double peak = key_max_lr > 0 ? key_max_lr : optim_lr;
  const double first = o.min_lr.empty() ? 0.0 : o.min_lr.front();
  detail::resolve_warmup_lr(o, optim_lr);
  const bool range_test = o.name == "range_test";
  // One min_lr scales with each group as its lr does (timm's lr_scale, which layer decay sets):
  // shared as PyTorch's eta_min, a layer-decayed stem's lr rose toward it during the decay (a
  // fine-tuning trial: 1.95e-7 to 9.93e-6, where timm ends at 2.1e-8). A list gives each group
  // its own, as written.
  const bool scale_min = range_test || o.min_lr.size() <= 1;
  o.max_lr.clear();
  if (scale_min) o.min_lr.clear();
  for (const auto& group : optimizer.param_groups()) {
    const double scale = group.options().get_lr() / optim_lr;
    o.max_lr.push_back(peak * scale);
    if (scale_min) o.min_lr.push_back(first * scale);
  }
  return o;
}

bool cycles_momentum(const SchedulerOptions& o) { return o.name == "one_cycle" && o.cycle_momentum; }

std::unique_ptr<LrScheduler> detail::make_counted(const SchedulerOptions& o, torch::optim::Optimizer& optimizer,
                                                  int64_t total_steps, const Span& span) {
  const auto fail = detail::config_fail;
  if (o.name == "constant") return std::make_unique<ConstantSchedule>(optimizer);
  if (o.name == "step") {
    if (o.step_size < 1)
      fail("step_size", detail::concat("the step schedule needs step_size >= 1 (", span.unit, "), got ", o.step_size, "."));
    return std::make_unique<StepSchedule>(optimizer, o.step_size, o.gamma.value_or(0.1));
  }
  if (o.name == "multistep") return std::make_unique<MultiStepSchedule>(optimizer, o.milestones, o.gamma.value_or(0.1));
  if (o.name == "exponential") {
    // No default: ExponentialLR requires gamma, and 0.1 per optimizer step would zero the lr fast.
    if (!o.gamma) fail("gamma", "the exponential schedule needs gamma (the per-step decay factor, e.g. 0.999).");
    return std::make_unique<ExponentialSchedule>(optimizer, *o.gamma);
  }
  if (o.name == "linear" || o.name == "cosine" || o.name == "polynomial")
    return detail::make_warmup_decay(o, optimizer, total_steps, span);
  if (o.name == "one_cycle") return detail::make_one_cycle(o, optimizer, total_steps);
  if (o.name == "reduce_on_plateau") return detail::make_plateau(o, optimizer);
  if (o.name == "range_test") return detail::make_range_test(o, optimizer, total_steps);
  fail("name", "\"" + o.name +
                   "\" is not a known schedule (constant, step, multistep, exponential, linear, cosine, polynomial, "
                   "one_cycle, reduce_on_plateau, range_test).");
  return nullptr;  // unreachable
}

void check_schedule_options(SchedulerOptions o, double optim_lr) {
  constexpr int64_t kLongRun = int64_t{1} << 40;
  torch::Tensor weight = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD optimizer({weight}, torch::optim::SGDOptions(optim_lr));
  // One group here: a list of one value per group is the run's to check.
  if (o.min_lr.size() > 1) o.min_lr.resize(1);
  if (o.max_lr.size() > 1) o.max_lr.resize(1);
  // Epochs of 2^20 steps: a warm-up in epochs fits too, unless it is longer than any run.
  make_scheduler(options_for_groups(o, optimizer, optim_lr), optimizer, kLongRun, int64_t{1} << 20);
}

int64_t total_optimizer_steps(int64_t epochs, int64_t batches_per_epoch_per_rank, int64_t grad_accum_steps) {
  TP_CHECK(epochs >= 0, "total_optimizer_steps: epochs must be >= 0, got ", epochs, ".");
  TP_CHECK(batches_per_epoch_per_rank >= 0, "total_optimizer_steps: batches per epoch must be >= 0, got ",
           batches_per_epoch_per_rank, ".");
  TP_CHECK(grad_accum_steps >= 1, "total_optimizer_steps: grad_accum_steps must be >= 1, got ", grad_accum_steps,
           ".");
  // Ceiling: the short last window still ends in an optimizer step.
  const int64_t per_epoch = batches_per_epoch_per_rank / grad_accum_steps +
                            (batches_per_epoch_per_rank % grad_accum_steps != 0 ? 1 : 0);
  int64_t total = 0;
  TP_CHECK(!__builtin_mul_overflow(epochs, per_epoch, &total), "total_optimizer_steps: ", epochs, " epochs × ",
           per_epoch, " steps overflows int64.");
  return total;
}

}  // namespace tp
