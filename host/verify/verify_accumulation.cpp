// The accumulation check: --steps optimizer steps at the config's batch B (and accumulation G)
// against the same steps at B/k with G x k micro-batches per step (k = 4 when B allows, else 2),
// both with plain SGD (plain_sgd_sets: the comparison is about gradients). The host normalises
// the loss over the whole window (tp/iface/loss.h), so the weights must agree to float32
// rounding. They differ by design when the model has BatchNorm (its batch statistics depend on
// the micro-batch) or draws random numbers in training mode (dropout, stochastic depth): that
// difference is measured and reported, and the exactness is then checked with
// model.freeze_bn_stats = true (BatchNorm normalising with its running statistics) and the
// model's conventional dropout keys at 0. A training split that pads a field (coco_detection's
// images) may differ by design too: a micro-batch pads to its own largest sample, which a model
// that reads the padding (a detector's anchors, a convolution's borders) sees; a difference beyond
// the tolerance is then reported and the check skipped, while a model that masks the padding
// is judged as any other. A loss
// returning a mean trains B/k x k with k times the gradient, which plain SGD shows.
// Both runs must train on the same samples, which they do only inside the first epoch's full
// windows: at an epoch's end the whole run drops its incomplete last batch and may close a short
// window, the split run drops less and closes its windows elsewhere, so a step across it trains
// other samples on each side (72 samples at 16 x 2 against 4 x 8: 0.0255 after 4 steps, 8.4e-08
// after 2). The compared steps are capped to those windows.
// Cost: 2 trainings of up to --steps steps (4 with BatchNorm), each a child process.
#include <algorithm>

#include "tp/framework/error.h"
#include "verify/verify.h"
#include "verify/verify_child.h"

namespace tp::cli::verify {
namespace {

/// Weights after --steps steps at batch `batch` x `accum` micro-batches, compared.
struct Comparison {
  ChildResult whole, split;
  NamedWeights whole_weights;
  WeightDifference difference;
  bool ok = false;
};

Comparison compare(VerifyContext& context, const std::filesystem::path& dir, int64_t steps, int64_t k,
                   const std::vector<std::string>& extra) {
  const TrainSection& t = context.config().train;
  const ChildRunner runner(context.options());
  auto sets = [&](int64_t batch, int64_t accum) {
    std::vector<std::string> s = plain_sgd_sets();
    s.insert(s.end(), {"train.max_steps=" + std::to_string(steps),
                       "train.batch_size=" + std::to_string(batch),
                       "train.grad_accum_steps=" + std::to_string(accum)});
    s.insert(s.end(), extra.begin(), extra.end());
    return s;
  };
  Comparison c;
  c.whole = runner.train(dir / "whole", sets(t.batch_size, t.grad_accum_steps));
  if (!c.whole.ok()) return c;
  c.split = runner.train(dir / "split", sets(t.batch_size / k, t.grad_accum_steps * k));
  if (!c.split.ok()) return c;
  c.whole_weights = c.whole.last_weights();
  c.difference = compare_weights(c.whole_weights, c.split.last_weights(), &context.initial_weights());
  c.ok = true;
  return c;
}

}  // namespace

CheckResult check_accumulation(VerifyContext& context) {
  const RunConfig& config = context.config();
  const int64_t batch = config.train.batch_size, accum = config.train.grad_accum_steps;
  // fp32 sums in a different order: ~1e-7 per step on Intel, but up to 9.3e-5 on an AMD EPYC (oneDNN's
  // kernels block a micro-batch of 2 otherwise than one of 8: the stem BatchNorm bias of
  // detect_shapes' FCOS from scratch after 2 steps). The bugs this check is for differ by far more:
  // a loss returning a mean 0.074, a batch-scaled offset 0.985 (tests/verify). Autocast rounds
  // every matmul to 8 or 11 bits.
  const double tolerance = config.amp.precision == Precision::Fp32 ? 1e-3 : 1e-2;
  CheckResult row("accumulation", "< " + format_value(tolerance) + " relative");
  const int64_t k = batch % 4 == 0 ? 4 : batch % 2 == 0 ? 2 : 0;
  if (k == 0) {
    row.status = Status::kSkip;
    row.reason = "train.batch_size = " + std::to_string(batch) + " cannot be split into micro-batches; set an even "
                 "batch size (--set train.batch_size=...) to check it";
    return row;
  }
  // The first epoch's full windows of the whole run (the training loader drops an incomplete
  // batch; one process, so the epoch is the whole split): the split run's first steps hold the
  // same samples in the same order (the sampler's order does not depend on the batch size).
  const auto samples = static_cast<int64_t>(context.parts().train_data->size());
  const int64_t windows = samples / (batch * accum);
  if (windows == 0) {
    row.status = Status::kSkip;
    row.reason = "the training split's " + std::to_string(samples) + " samples hold no full window of " +
                 std::to_string(batch) + " x " + std::to_string(accum) + ", so the two runs would train on other "
                 "samples; lower train.batch_size or train.grad_accum_steps (--set ...) to check it";
    return row;
  }
  const int64_t steps = std::min(context.steps(), windows);
  std::string what = std::to_string(steps) + " steps of plain SGD at batch " + std::to_string(batch) + " x " +
                     std::to_string(accum) + " against " + std::to_string(batch / k) + " x " + std::to_string(accum * k);
  if (steps < context.steps())
    what += " (not --steps " + std::to_string(context.steps()) + ": the first epoch of " + std::to_string(samples) +
            " samples holds " + std::to_string(windows) + " full window(s), and after it the two runs train on "
            "other samples)";
  const std::filesystem::path dir = context.check_dir("accumulation");
  const Comparison live = compare(context, dir / "live", steps, k, {});
  if (!live.ok) {
    row.status = Status::kFail;
    row.reason = (live.whole.ok() ? live.split : live.whole).failure();
    return row;
  }
  const std::string measured = format_value(live.difference.relative) + " at '" + live.difference.worst + "'";
  const ModelRandomness& randomness = context.model_randomness();
  const bool batchnorm = has_batchnorm_statistics(live.whole_weights) && !config.freeze_bn_stats;
  // Padding matters only to a model that reads the padded elements: judged first, excused after.
  const std::string padding = padding_by_design(context);
  const auto excused_by_padding = [&](const std::string& difference) {
    row.status = Status::kSkip;
    row.reason = what + ": differs by " + difference + ", by design: " + padding + ". The loss check's item "
                 "counts show the window's normalisation";
    return row;
  };
  if (config.data.batch_transforms.empty() && !batchnorm && !randomness.random) {
    row.measured = format_value(live.difference.relative);
    row.reason = what + ": max relative weight difference " + measured + moved_note(live.difference);
    if (!(live.difference.relative < tolerance) && !padding.empty()) return excused_by_padding(measured);
    if (!(live.difference.relative < tolerance)) {
      row.status = Status::kFail;
      row.notes.emplace_back("the loss of a window must be normalised by the window's item count: a loss returning a "
                          "mean (see the loss check), statistics over the batch outside BatchNorm, state that "
                          "counts forward calls, or per-batch randomness makes micro-batches train differently");
    }
    return row;
  }
  if (!config.data.batch_transforms.empty()) {
    row.status = Status::kSkip;
    row.measured = format_value(live.difference.relative);
    row.reason = what + ": differs by design by " + measured + ": [[data.batch_transforms]] draw each blend per "
                 "micro-batch, so the two runs train on different batches";
    return row;
  }
  // Differs by design: compare again with what makes it differ switched off.
  std::vector<std::string> exact_sets;
  std::string exact_what;
  if (batchnorm) {
    row.notes.emplace_back("differs by design with live BatchNorm statistics (each micro-batch is normalised by its own "
                           "statistics)");
    exact_sets.emplace_back("model.freeze_bn_stats=true");
    exact_what = "model.freeze_bn_stats = true";
  }
  if (randomness.random) {
    row.notes.emplace_back("differs by design: the model draws random numbers in training mode (dropout, stochastic "
                           "depth), so micro-batches draw other masks than the whole batch");
    if (randomness.off_sets.empty()) {
      row.status = Status::kSkip;
      row.measured = format_value(live.difference.relative);
      row.reason = what + ": differs by design by " + measured + "; the model's table has none of the conventional "
                   "keys that switch its randomness off (dropout, drop_path, stochastic_depth_prob, ...)";
      return row;
    }
    for (const std::string& set : randomness.off_sets) {
      exact_sets.push_back(set);
      exact_what += (exact_what.empty() ? "" : ", ") + set;
    }
  }
  row.notes.back() += ": measured " + measured;
  const Comparison exact = compare(context, dir / "exact", steps, k, exact_sets);
  if (!exact.ok) {
    const ChildResult& failed = exact.whole.ok() ? exact.split : exact.whole;
    row.status = failed.exit_code == kExitConfig ? Status::kSkip : Status::kFail;
    row.measured = format_value(live.difference.relative);
    row.reason = what + ": differs by design; no exact comparison: " + failed.failure();
    return row;
  }
  row.measured = format_value(exact.difference.relative) + " (" + (batchnorm ? "frozen BatchNorm" : "") +
                 (batchnorm && randomness.random ? ", " : "") + (randomness.random ? "no dropout" : "") + ")";
  row.reason = what + " with " + exact_what + ": max relative weight difference " +
               format_value(exact.difference.relative) + " at '" + exact.difference.worst + "'" +
               moved_note(exact.difference);
  if (!(exact.difference.relative < tolerance) && !padding.empty())
    return excused_by_padding(format_value(exact.difference.relative) + " at '" + exact.difference.worst + "' with " +
                              exact_what);
  if (!(exact.difference.relative < tolerance)) row.status = Status::kFail;
  return row;
}

}  // namespace tp::cli::verify
