// The hot path: one optimizer step in numbered phases (ARCH-15): 1-3 for each micro-batch of
// the accumulation window, 4 the ranks' agreement, 5 the update, 6 what advances with the step.
// Under run.cuda_graphs, 2-3 and 5 of a whole window may run as one graph replay
// (step_runner_graphs.cpp, docs/cuda_graphs.md); 4 stays here, on the host.
#include "engine/training/step_runner.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <csignal>
#include <optional>
#include <string_view>
#include <utility>

#include "step_capture.h"
#include "step_graph.h"
#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/dist/batchnorm_sync.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/data/collate.h"
#include "engine/training/batch_error.h"
#include "engine/training/batch_transforms.h"
#include "engine/training/out_of_memory.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/framework/profile/flop_counter.h"
#include "tp/framework/profile/memory.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

// Times a phase of the step and ends it also when the phase throws, so an out-of-memory retry
// leaves no started phase behind (on CUDA an unrecorded end event).
class PhaseTiming {
 public:
  PhaseTiming(TrainingReport& report, StepPhase phase) : report_(report), phase_(phase) { report_.begin(phase_); }
  ~PhaseTiming() { report_.end(phase_); }
  PhaseTiming(const PhaseTiming&) = delete;
  PhaseTiming& operator=(const PhaseTiming&) = delete;

 private:
  TrainingReport& report_;
  StepPhase phase_;
};

bool is_logging_step(int64_t step, int64_t log_every) { return (step + 1) % log_every == 0; }

}  // namespace

StepRunner::StepRunner(const RunConfig& config, RunComponents& parts, const std::vector<StateTensor>& model_state,
                       BuiltOptimizer& optim, ParameterUpdate& update, const BatchPlacement& placement,
                       TrainMeters& meters, Logger& log, Collectives& collectives)
    : config_(config),
      parts_(parts),
      model_state_(model_state),
      optim_(optim),
      placement_(placement),
      meters_(meters),
      log_(log),
      collectives_(collectives),
      update_(update) {
  const auto zero = [&] { return at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(placement.device())); };
  totals_ = {zero(), zero()};
}

StepRunner::~StepRunner() = default;

void StepRunner::build_gradient_reducer() {
  reducer_ = collectives_.gradient_reducer(model_state_, config_.dist.overlap);
  // A frozen group joined: a captured step would leave its parameters out of the update.
  if (capture_) capture_->invalidate();
  const std::string buckets = reducer_->describe();
  if (buckets.empty()) return;
  log_.info(buckets + "; batch " + std::to_string(config_.train.batch_size) + " per rank = " +
            std::to_string(config_.train.batch_size * collectives_.world_size() * config_.train.grad_accum_steps) +
            " samples per optimizer step");
}

StepOutcome StepRunner::optimizer_step(const MicroBatchFeed& next, int64_t window_length, int64_t epoch,
                                       uint32_t control_flags) {
  // The lrs the schedule set, onto the device, outside any capture (a graph reads them there).
  update_.stage();
  if (capture_) capture_->before_step();
  // run.sync_debug: nothing in a step may wait for the device, except on logging steps (they
  // read the loss and the update statistics), an fp16 SGD's first momentum step (decided on the
  // host, once) and while a graph is being prepared.
  const bool exempt = is_logging_step(update_.step(), config_.train.log_every_steps) || update_.host_decides_once() ||
                      (capture_ && capture_->audit_exempt());
  std::optional<SyncAudit> audit;
  if (!exempt) audit.emplace(config_.run.sync_debug, placement_.device());
  window_ = WindowState{};
  StepOutcome outcome;
  StepPosition at{update_.step(), epoch, 0};
  // 1-3. Fetch each micro-batch of the window and place it on the device, then forward and
  //      backward (gradients accumulate) as it arrives: one micro-batch on the device at a time.
  //      Under run.cuda_graphs the window is held until it is whole: a replay trains all of it.
  HeldWindow held;
  for (int64_t i = 0; i < window_length; ++i) {
    std::optional<MicroBatch> micro = next();
    if (!micro) break;
    ++outcome.micro_batches;
    at.batch = micro->next_index;
    NamedTensors batch = place(std::move(micro->tensors), at);
    if (capture_) {
      held.batches.push_back(std::move(batch));
      held.next_indices.push_back(at.batch);
    } else {
      train_micro_batch(batch, {window_length, i == 0, i + 1 == window_length}, at);
    }
  }
  outcome.complete = outcome.micro_batches == window_length;
  // 2-3 (and 5) of a held window: the warm-up and any window a graph cannot replay trained as
  //      above, probed for host syncs until the capture; else one replay (captured first if new).
  const GraphPlan plan = capture_ ? plan_graph(held, outcome.complete) : GraphPlan{};
  std::optional<SyncProbe> probe;
  if (plan.probe) probe.emplace(placement_.device());
  if (plan.use == StepCapture::Use::kEager) train_held(held.batches, held.next_indices, window_length, at);
  else run_graph(plan.use, held, window_length, at);
  // The loader ran dry: a partial window takes no update, and a poisoned one leaves no buffers.
  if (!outcome.complete) {
    if (window_.poisoned) put_back_buffers();
    return outcome;
  }
  // 4-5. Agree with the other ranks, then update, unless nan_policy = "skip" poisoned the window
  //      or no rank had an item.
  const bool replayed = plan.use != StepCapture::Use::kEager;
  close_window(control_flags, replayed, at, outcome);
  if (capture_ && !replayed) {
    if (probe && !probe->first_sync().empty()) capture_->record_host_sync(probe->first_sync());
    capture_->eager_step_done();
  }
  // 6. Advance: time moves on one optimizer step whether or not the window updated; the model's
  //    after_optimizer_step hook (ABI 1.14) runs here, eagerly, also after a graph replay.
  finish_step(outcome);
  return outcome;
}

void StepRunner::close_window(uint32_t control_flags, bool replayed, const StepPosition& at, StepOutcome& outcome) {
  PhaseTiming timing(meters_.report(), StepPhase::kOptimizer);
  // 4. Agree with the other ranks: one collective, whatever the reasons it carries.
  outcome.agreed = agree_on_window(control_flags, at);
  // 5. Update or skip; a replayed window's update ran in its graph.
  outcome.updated = replayed || update_or_skip(at);
}

void StepRunner::train_held(const std::vector<NamedTensors>& batches, const std::vector<int64_t>& next_indices,
                            int64_t window_length, StepPosition& at) {
  for (std::size_t i = 0; i < batches.size(); ++i) {
    at.batch = next_indices[i];
    train_micro_batch(batches[i], {window_length, i == 0, static_cast<int64_t>(i) + 1 == window_length}, at);
  }
}

void StepRunner::finish_step(StepOutcome& outcome) {
  outcome.group_lrs = update_.advance(outcome.updated);
  outcome.lr = outcome.group_lrs.front();
  if (is_logging_step(update_.step() - 1, config_.train.log_every_steps)) outcome.update_stats = update_.read_stats();
}

NamedTensors StepRunner::place(NamedTensors cpu_batch, const StepPosition& at) {
  if (cpu_batch.empty()) return cpu_batch;
  // The loader already collated this batch on a worker; place it on the device (non_blocking
  // from pinned memory on CUDA, a no-op on CPU), then run the training batch transforms in order
  // (mixup, cutmix: device work, seeded by the batch's position; at.batch is the index of the
  // batch after this one).
  return apply_batch_transforms(parts_.batch_transforms, placement_.to_device(std::move(cpu_batch)),
                                {static_cast<uint64_t>(config_.run.seed), collectives_.rank(),
                                 static_cast<uint64_t>(at.epoch), static_cast<uint64_t>(at.batch - 1)});
}

void StepRunner::train_micro_batch(const NamedTensors& batch, const AccumulationWindow& window,
                                   const StepPosition& at) {
  begin_micro_batch(window, at.step);
  if (!batch.empty()) {
    // 2-3. Forward and backward, piece by piece: one piece, the whole batch, unless
    //      train.on_oom = "split" cut micro-batches after an out-of-memory error.
    train_pieces(batch, window, at);
    return;
  }
  // Every sample skipped (data.on_bad_sample = "skip"): this rank has no forward to run, and a
  // plugin's collectives in the others' forwards would wait for it or pair with other calls.
  if (collectives_.world_size() > 1 && collectives_.plugin_collectives_used())
    throw Error("rank " + std::to_string(collectives_.rank()) + ": every sample of training batch " +
                std::to_string(at.batch) + " (step " + std::to_string(at.step + 1) + ", epoch " +
                std::to_string(at.epoch + 1) + ") was skipped (data.on_bad_sample = \"skip\"), so this rank has "
                "no forward to run, but a plugin uses the ranks' collectives (tp.dist/2) in every training forward "
                "and the other ranks' calls would wait for this one's (PLG-22). Remove or repair the unreadable "
                "files (`host plugins check --samples all` lists them), or raise train.batch_size so that a batch "
                "keeps some samples.");
  if (window.last && reducer_->sums_over_ranks()) {
    // Every sample skipped (data.on_bad_sample = "skip"), but this backward is a collective.
    join_all_reduce(window);
  }
}

bool StepRunner::update_or_skip(const StepPosition& at) {
  if (window_.poisoned || window_.empty) {
    // No update; gradients are dropped (set to none).
    optim_.optimizer->zero_grad(/*set_to_none=*/true);
    if (window_.poisoned) {
      ++skipped_steps_;
      put_back_buffers();
    }
    return false;
  }
  try {
    update_parameters();
  } catch (...) {
    // Optimizer state is allocated at the first step: smaller micro-batches would not shrink it.
    if (!is_out_of_memory(std::current_exception())) throw;
    const OutOfMemorySite site{"optimizer step", 0, at.step + 1, at.epoch + 1, config_.train.batch_size,
                               config_.train.grad_accum_steps, splits_};
    throw Error(out_of_memory_report(site, placement_.device(),
                                     config_.train.on_oom == OomPolicy::kSplit ? "smaller micro-batches do not shrink the "
                                                                       "gradients and the optimizer's state" : "",
                                     std::current_exception()));
  }
  return true;
}

void StepRunner::begin_micro_batch(const AccumulationWindow& window, int64_t step) {
  // Phase timing (training_report.h): every step on CPU; on CUDA only the log step's window,
  // with device events and no extra sync.
  if (window.first) {
    // Under a capture, nothing is timed (device events would be captured) and no logging
    // window's sums ride with the agreement: the graph serves every later step alike.
    window_.log = !window_.capturing && is_logging_step(step, config_.train.log_every_steps);
    meters_.report().begin_window(window_.log);
  }
  // Data-parallel: the reducer is told whether this backward communicates (window.last). Every
  // micro-batch, empty or not, so every rank makes the reducer's collectives in the same order.
  reducer_->before_forward(window.last);
  if (!window.first) return;
  sync_buffers();
  totals_.items.zero_();
  // A skipped window must leave the model as it found it: its training-mode forwards updated the
  // BatchNorm statistics (and their batch count) from the batch whose loss was not finite, and
  // NaN statistics would then poison every evaluation and save (migration trial F3). The
  // buffers are small (ResNet-50's: 0.2 MB); "skip" is eager-only (cuda_graph_policy.cpp).
  if (config_.train.nan_policy == NanPolicy::kSkip)
    for (const auto& s : model_state_)
      if (s.is_buffer) window_.buffers_before.push_back(s.tensor.detach().clone());
}

void StepRunner::train_pieces(const NamedTensors& batch, const AccumulationWindow& window, const StepPosition& at) {
  const BatchLayout& layout = parts_.train_data->batch_layout();
  const int64_t rows = batch_size(batch, layout);
  int64_t done = 0;
  while (done < rows) {
    // After a split the rest of the batch is cut with the new piece size (ceil: rows / splits_).
    const int64_t count = std::min(rows - done, (rows + splits_ - 1) / splits_);
    const bool sync = window.last && done + count == rows; // only the micro-batch's last backward all-reduces
    try {
      train_piece(count == rows ? batch : batch_rows(batch, done, count, layout), window, sync, at);
    } catch (...) {
      recover_from_out_of_memory(std::current_exception(), count, sync, at);
      continue; // the same rows again, in smaller pieces
    }
    done += count;
  }
}

void StepRunner::train_piece(const NamedTensors& piece, const AccumulationWindow& window, bool sync,
                             const StepPosition& at) {
  // 2. Forward under autocast, then the window-normalised loss and the non-finite check.
  window_.piece_phase = "forward";
  const LossTerms terms = forward(piece, at);
  const at::Tensor loss = normalised_loss(terms, window);
  const at::Tensor sum = terms.sum.detach().to(at::kDouble);
  check_finite(sum, at);
  // 3. Backward through the (fp16: scaled) loss; gradients accumulate over the window.
  window_.piece_phase = "backward";
  {
    PhaseTiming timing(meters_.report(), StepPhase::kBackward);
    backward(loss, sync);
  }
  // Counted once the piece is in the gradients (a piece retried after running out of memory is not).
  const at::Tensor items = terms.count.detach().to(at::kDouble);
  totals_.items.add_(items);
  ++window_.backwards;
  // Report: accumulate on the device; the value is read only on log steps (a device sync).
  if (!window_.poisoned) meters_.add_loss(sum, items, terms.terms);
}

void StepRunner::recover_from_out_of_memory(const std::exception_ptr& error, int64_t samples, bool sync,
                                            const StepPosition& at) {
  if (!is_out_of_memory(error)) std::rethrow_exception(error);
  const bool in_backward = std::string_view(window_.piece_phase) == "backward";
  // A backward that failed half-way has added part of its gradient: undoable only while the
  // window's gradients hold nothing else (they are none at a window's start), and never where the
  // other ranks are already all-reducing buckets of it.
  std::string why_not;
  if (samples <= 1) why_not = "a single sample does not fit";
  else if (in_backward && window_.backwards > 0)
    why_not = "it came in a backward after earlier pieces of this accumulation window had added to the gradients, "
              "which cannot be taken back";
  else if (in_backward && sync && reducer_->overlaps_backward())
    why_not = "it came in the backward that all-reduces gradient buckets with the other ranks as they fill";
  else if (collectives_.plugin_collectives_used())
    why_not = "a plugin uses the ranks' collectives (tp.dist/2) in its training forwards, and pieces on this rank "
              "alone would pair its calls with other calls of the other ranks (PLG-22)";
  const OutOfMemorySite site{window_.piece_phase, samples, at.step + 1, at.epoch + 1, config_.train.batch_size,
                             config_.train.grad_accum_steps, splits_};
  if (config_.train.on_oom != OomPolicy::kSplit || !why_not.empty())
    throw Error(out_of_memory_report(site, placement_.device(), config_.train.on_oom == OomPolicy::kSplit ? why_not : "", error));
  // The failed piece's tensors were freed as the error unwound; the gradients it wrote partly go
  // too, and the allocator's cache returns to the device so the halves start unfragmented.
  if (in_backward) optim_.optimizer->zero_grad(/*set_to_none=*/true);
  release_cached_memory(placement_.device());
  splits_ *= 2;
  window_.split = true;
  const int64_t piece = (config_.train.batch_size + splits_ - 1) / splits_;
  const std::string rank = collectives_.world_size() > 1 ? ", rank " + std::to_string(collectives_.rank()) : "";
  log_.warn("out of memory in the " + std::string(window_.piece_phase) + " of " + std::to_string(samples) +
            " samples at step " + std::to_string(at.step + 1) + " (epoch " + std::to_string(at.epoch + 1) + rank +
            "); train.on_oom = \"split\": micro-batches are cut in " + std::to_string(splits_) + " pieces of at most " +
            std::to_string(piece) + " samples from here on, and each optimizer step still averages the same " +
            std::to_string(config_.train.batch_size * config_.train.grad_accum_steps) + " samples per rank");
}

LossTerms StepRunner::forward(const NamedTensors& batch, const StepPosition& at) {
  TrainingReport& report = meters_.report();
  PhaseTiming timing(report, StepPhase::kForward);
  AutocastGuard autocast(placement_.device().type(), config_.amp.precision);
  // Once, on the run's first batch: the model's forward FLOPs, for perf/tflops. The counter only
  // reads the ops' records (a few microseconds per op, this step only).
  std::optional<FlopCounter> flops;
  if (!report.flops_measured()) flops.emplace();
  // A failure names the component, the step and the fields (batch_error.h); the lambdas that
  // describe it run only when a call throws.
  const auto phase = [&] {
    return "training step " + std::to_string(at.step + 1) + " (epoch " + std::to_string(at.epoch + 1) + ", batch " +
           std::to_string(at.batch) +
           (collectives_.world_size() > 1 ? ", rank " + std::to_string(collectives_.rank()) : "") + ")";
  };
  const NamedTensors outputs = with_batch_context([&] { return parts_.model->forward(batch); }, [&] {
    return BatchFailure{"model", parts_.model->id(), "forward", phase(), "[model]", {{"inputs", &batch}}};
  });
  if (flops) report.set_forward_flops(flops->total_flops(), batch_size(batch, parts_.train_data->batch_layout()));
  flops.reset();
  return with_batch_context([&] { return parts_.loss->forward(outputs, batch); }, [&] {
    return BatchFailure{"loss", parts_.loss->id(), "forward", phase(), "[loss]", {{"outputs", &outputs}, {"targets", &batch}}};
  });
}

at::Tensor StepRunner::normalised_loss(const LossTerms& terms, const AccumulationWindow& window) {
  const at::Tensor items = terms.count.detach().to(at::kDouble);
  // The window's loss is (sum over all its items) / (its item count), which is only known at
  // the window's end. Divide by an estimate now (the window's first non-empty micro-batch's
  // count x window length) and correct the gradients by estimate / actual once the window is
  // complete (update): exact for uneven micro-batches and the short last window, and no extra
  // device sync. Where gradients are summed over ranks before the correction, the estimate must
  // be the same on every rank, so it is the nominal batch size x window length. A micro-batch
  // cut in pieces (train.on_oom) counts as that many micro-batches.
  if (window_.batches++ == 0) {
    if (reducer_->sums_over_ranks())
      totals_.estimate.fill_(static_cast<double>(config_.train.batch_size * window.length));
    // At least 1: a first micro-batch whose items all count zero (an ignore index) must not
    // divide by zero; any non-zero estimate is exact after the correction.
    else totals_.estimate.copy_(items.clamp_min(1.0) * static_cast<double>(window.length * splits_));
  }
  return terms.sum.to(at::kFloat) / totals_.estimate.to(at::kFloat);
}

void StepRunner::check_finite(const at::Tensor& sum, const StepPosition& at) {
  // Where that is free or needed (nan_policy.h); otherwise at the host's next read of the loss.
  if (!meters_.nan_checks().per_step || std::isfinite(sum.item<double>())) return;
  const std::string where = "at step " + std::to_string(at.step + 1) + " (epoch " + std::to_string(at.epoch + 1) +
                            ", batch " + std::to_string(at.batch) + ", lr " +
                            short_number(current_lr(*optim_.optimizer)) + ")";
  // Where backward is a collective it must still run; the ranks decide together at the window's
  // end (agree_on_window) and stop or skip as one.
  if (config_.train.nan_policy == NanPolicy::kStop && !reducer_->sums_over_ranks())
    throw Error("the training loss became non-finite " + where +
                ". Lower optim.lr, check the data for NaN/Inf, clip gradients (train.max_grad_norm), or set "
                "train.nan_policy = \"skip\" to skip such steps.");
  if (!window_.poisoned) {
    window_.first_non_finite = where;
    if (config_.train.nan_policy == NanPolicy::kSkip) log_.warn("non-finite training loss " + where + ": skipping this optimizer step");
  }
  window_.poisoned = true;
}

void StepRunner::backward(const at::Tensor& loss, bool sync) {
  // Data-parallel, the window's last backward (`sync`): buckets are all-reduced as they fill,
  // overlapping the rest of backward; earlier ones accumulate locally with no communication.
  // A poisoned window's backward runs only where it is a collective the other ranks wait in.
  if (window_.poisoned && !reducer_->sums_over_ranks()) return;
  reducer_->backward(update_.scaler().scale(loss), sync);
}

void StepRunner::join_all_reduce(const AccumulationWindow& window) {
  // A zero loss that reaches every trainable parameter: this rank contributes zero gradient and
  // zero items to the window's all-reduce, which the other ranks are waiting in.
  at::Tensor zero = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(placement_.device()));
  for (const auto& s : model_state_)
    if (!s.is_buffer && s.tensor.requires_grad()) zero = zero + s.tensor.sum().to(at::kFloat) * 0.0;
  PhaseTiming timing(meters_.report(), StepPhase::kBackward);
  backward(zero, window.last);
}

uint32_t StepRunner::agree_on_window(uint32_t control_flags, const StepPosition& at) {
  // With dist.overlap = false the gradient buckets are all-reduced here, after backward.
  reducer_->after_backward();
  // One collective: the flags of every reason to stop, save or skip ride with the item count,
  // and on a logging step with the meters' window sums (the log step then reads them without a
  // collective of its own). Data-parallel, the flags are read on the host: a sync point once per
  // optimizer step on CUDA. A single process reads nothing (the identity).
  uint32_t flags = control_flags;
  if (window_.poisoned) flags |= kFlagNonFinite;
  if (window_.split) flags |= kFlagSplit;
  if (window_.batches > 0) flags |= kFlagHasBatch;
  const at::Tensor items = totals_.items.reshape({1});
  const Agreement agreed = collectives_.agree(flags, window_.log ? at::cat({items, meters_.window_sums()}) : items,
                                              "agree on the window's item count and stop flags");
  if (window_.log) meters_.set_agreed_window_sums(agreed.sums.slice(0, 1));
  window_.poisoned = (agreed.flags & kFlagNonFinite) != 0;
  if (window_.poisoned && config_.train.nan_policy == NanPolicy::kStop)
    throw Error("the training loss became non-finite on at least one rank at step " + std::to_string(at.step + 1) +
                " (epoch " + std::to_string(at.epoch + 1) +
                (window_.first_non_finite.empty() ? "" : "; on this rank " + window_.first_non_finite) +
                "); every rank stops. Lower optim.lr, check the data for NaN/Inf, clip gradients "
                "(train.max_grad_norm), or set train.nan_policy = \"skip\".");
  if (agreed.flags & kFlagSplit) agree_on_splits();
  // No micro-batch with data on any rank (every sample of the window skipped): the gradients are
  // the zeros the empty micro-batches contributed, and the window takes no update.
  window_.empty = (agreed.flags & kFlagHasBatch) == 0;
  // Gradients summed over ranks arrive averaged, each divided by the shared estimate:
  // multiplying by estimate x world / global items makes them the gradient of (global loss sum /
  // global items). A window whose items all count zero (an ignore index) keeps zero gradients.
  if (reducer_->sums_over_ranks()) {
    const at::Tensor global_items = agreed.sums[0];
    window_.correction = at::where(global_items > 0,
                            totals_.estimate * static_cast<double>(collectives_.world_size()) / global_items,
                            at::zeros_like(global_items));
  }
  return agreed.flags;
}

void StepRunner::agree_on_splits() {
  // Rare (after an out-of-memory split on some rank), so a collective of its own: every rank
  // takes the largest split, so all ranks cut alike and the checkpoint records what fits everywhere.
  const at::Tensor mine = at::full({1}, static_cast<double>(splits_), totals_.items.options());
  int64_t largest = splits_;
  std::string ranks;
  const std::vector<at::Tensor> all = collectives_.all_gather(mine, "agree on the micro-batch split after out of memory");
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto splits = static_cast<int64_t>(all[r].cpu().item<double>());
    largest = std::max(largest, splits);
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r) + ": " + std::to_string(splits);
  }
  log_.info("micro-batch pieces per rank after out of memory (" + ranks + "): every rank cuts in " +
              std::to_string(largest) + " from the next step");
  splits_ = largest;
}

void StepRunner::update_parameters() {
  // The window's exact normalisation (see normalised_loss) as one factor for every gradient:
  // data-parallel, the agreement's correction; otherwise estimate / actual items, 1 when
  // micro-batches are even, and zero gradients for a window whose items all count zero.
  at::Tensor correction = window_.correction;
  if (!correction.defined() && config_.train.grad_accum_steps * splits_ > 1)
    correction = at::where(totals_.items > 0, totals_.estimate / totals_.items, at::zeros_like(totals_.items));
  // A graphed step measures the gradient norm every step: the capture serves every later step.
  update_.apply(correction, window_.log || window_.capturing);
}

void StepRunner::put_back_buffers() {
  c10::NoGradGuard no_grad;
  auto before = window_.buffers_before.begin();
  for (const auto& s : model_state_)
    if (s.is_buffer && before != window_.buffers_before.end()) s.tensor.detach().copy_(*before++);
}

void StepRunner::sync_buffers() {
  // A single process: the broadcast is the identity, and nothing is collected for it.
  if (!config_.dist.broadcast_buffers || !reducer_->sums_over_ranks()) return;
  // dist.bn_stats = "reduce": each rank keeps its own running statistics between evaluations
  // and saves, where the trainer averages them (batchnorm_sync.h); other buffers are rank 0's.
  const bool keep_statistics = config_.dist.bn_stats == BatchNormSync::kReduce;
  std::vector<at::Tensor> buffers;
  for (const auto& s : model_state_)
    if (s.is_buffer && !(keep_statistics && is_batchnorm_statistic(s.name))) buffers.push_back(s.tensor.detach());
  if (buffers.empty()) return;
  c10::NoGradGuard no_grad;
  collectives_.broadcast(buffers, "broadcast rank 0's buffers");
}

}  // namespace tp
