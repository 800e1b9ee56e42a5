// The distributed check, on the CPU with 2 Gloo ranks of the built-in launcher: --steps plain SGD
// steps of 2 ranks x B/2 against 1 process x B (the sampler gives the 2 ranks the samples of the
// 1-process batch, and the host all-reduces loss sums, counts and gradients), then the
// 1-process run's checkpoint evaluated by 2 ranks against 1 (metric states are all-reduced with
// SUM before compute()). Training differs by design when the model has BatchNorm (each rank
// normalises its half batch; compared with model.freeze_bn_stats = true instead), and when the
// dataset augments (the per-sample seed mixes in the rank, PLG-8) or batch transforms blend: then
// only the difference is reported. Evaluation never differs by design. With train.drop_last =
// false and an odd training split the sampler pads rank 1's share with a repeat of the epoch's
// first sample, so the epoch's last window trains one sample more on 2 ranks than on 1 (73 samples
// at 16: 0.078 after 5 steps, 8.2e-08 after 4): the compared steps stop before it. With drop_last
// each rank drops half the leftover and every epoch matches. Cost: 2 trainings of up to --steps
// steps (one of 2 ranks), 2 evaluations of the validation split (one of 2 ranks).
#include <algorithm>
#include <cmath>

#include "tp/framework/dist/batchnorm_sync.h"
#include "verify/verify.h"
#include "verify/verify_child.h"

namespace tp::cli::verify {
namespace {

// eval_*.json holds each value with 6 decimals (std::to_string): allow that rounding.
constexpr double kEvalRelative = 1e-5;
constexpr double kEvalAbsolute = 2e-6;

/// Why 2 ranks cannot train exactly like 1 with this config, or "" when they should.
std::string training_differs_by_design(VerifyContext& context) {
  const RunConfig& config = context.config();
  if (!config.data.batch_transforms.empty())
    return "[[data.batch_transforms]] draw their blends per rank";
  const auto seed = static_cast<uint64_t>(config.run.seed);
  const std::optional<uint64_t> sample = first_sample_differing_by_rank(*context.parts().train_data, seed);
  if (sample)
    return "training sample " + std::to_string(*sample) + " differs between rank 0 and rank 1 (augmentation draws "
           "from ctx->seed, which mixes in the rank; PLG-8)";
  const ModelRandomness& randomness = context.model_randomness();
  if (randomness.random && randomness.off_sets.empty())
    return "the model draws random numbers in training mode (dropout, stochastic depth) and its table has none of "
           "the conventional keys that switch them off";
  return "";
}

/// The largest difference between the 1-rank and the 2-rank evaluation, over the values both
/// report; "" in `problem` unless one is beyond the tolerance.
double compare_evaluations(const std::filesystem::path& one, const std::filesystem::path& two, std::string& problem) {
  const auto a = read_eval_values(one);
  const auto b = read_eval_values(two);
  double worst = 0;
  for (const auto& entry : a) {
    const std::string& name = entry.first;
    const double value = entry.second;
    if (!name.starts_with("val/")) continue;
    const auto found = std::find_if(b.begin(), b.end(), [&name](const auto& other) { return other.first == name; });
    if (found == b.end()) {
      problem = "the 2-rank evaluation has no " + name;
      continue;
    }
    const double difference = std::abs(value - found->second);
    worst = std::max(worst, difference / std::max(std::abs(value), 1e-12));
    if (!(difference <= kEvalRelative * std::abs(value) + kEvalAbsolute) && problem.empty())
      problem = name + " = " + format_value(value) + " on 1 rank but " + format_value(found->second) + " on 2";
  }
  return worst;
}

}  // namespace

CheckResult check_distributed(VerifyContext& context) {
  const RunConfig& config = context.config();
  const int64_t batch = config.train.batch_size;
  const double tolerance = config.amp.precision == Precision::Fp32 ? 1e-5 : 1e-2;
  CheckResult row("distributed", "train < " + format_value(tolerance) + ", eval < " + format_value(kEvalRelative));
  if (batch % 2 != 0) {
    row.status = Status::kSkip;
    row.reason = "train.batch_size = " + std::to_string(batch) + " is odd: 2 ranks cannot each take half; set an even "
                 "batch size to check it";
    return row;
  }
  // The padded window: the first epoch's last (B x G holds every full batch before it; the loop
  // closes a short window at the epoch's end). Both sides train the same samples before it.
  const auto samples = static_cast<int64_t>(context.parts().train_data->size());
  const int64_t accum = config.train.grad_accum_steps;
  const bool padded = !config.train.drop_last && samples % 2 != 0;
  const int64_t windows = samples / (batch * accum);
  if (padded && windows == 0) {
    row.status = Status::kSkip;
    row.reason = "train.drop_last = false and the training split's " + std::to_string(samples) + " samples are odd: "
                 "2 ranks pad the epoch's only window with a repeated sample, so the two runs would train on other "
                 "samples; set train.drop_last = true or lower train.batch_size or train.grad_accum_steps (--set ...) "
                 "to check it";
    return row;
  }
  const int64_t steps = padded ? std::min(context.steps(), windows) : context.steps();
  const std::vector<StateTensor>& state = context.model_state();
  const bool batchnorm = !config.freeze_bn_stats && std::any_of(state.begin(), state.end(), [](const StateTensor& s) {
    return is_batchnorm_statistic(s.name);
  });
  const std::string by_design = training_differs_by_design(context);
  // Gloo on the CPU: any machine can run 2 ranks; a finite timeout turns a hang into a failure.
  std::vector<std::string> sets = plain_sgd_sets();
  sets.insert(sets.end(), {"run.device=\"cpu\"", "dist.backend=\"gloo\"", "dist.timeout_s=120",
                           "train.max_steps=" + std::to_string(steps)});
  if (batchnorm) sets.emplace_back("model.freeze_bn_stats=true");
  // Each rank draws its own dropout masks: compared with the model's randomness switched off.
  const std::vector<std::string>& no_dropout = context.model_randomness().off_sets;
  sets.insert(sets.end(), no_dropout.begin(), no_dropout.end());
  auto with_batch = [&](int64_t b) {
    std::vector<std::string> s = sets;
    s.push_back("train.batch_size=" + std::to_string(b));
    return s;
  };
  const std::filesystem::path dir = context.check_dir("distributed");
  const ChildRunner runner(context.options());
  const ChildResult one = runner.train(dir / "one_rank", with_batch(batch));
  const ChildResult two = one.ok() ? runner.train(dir / "two_ranks", with_batch(batch / 2), 2) : one;
  if (!one.ok() || !two.ok()) {
    row.status = Status::kFail;
    row.reason = (one.ok() ? two : one).failure();
    return row;
  }
  const WeightDifference trained = compare_weights(one.last_weights(), two.last_weights(), &context.initial_weights());
  std::string switched_off;
  for (const std::string& set : no_dropout) switched_off += ", " + set;
  std::string what = std::to_string(steps) + " steps of plain SGD, 2 ranks x " + std::to_string(batch / 2) +
                     " against 1 x " + std::to_string(batch) +
                     (batchnorm ? " (frozen BatchNorm" + switched_off + ")"
                                : switched_off.empty() ? "" : " (" + switched_off.substr(2) + ")");
  if (steps < context.steps())
    what += " (not --steps " + std::to_string(context.steps()) + ": with train.drop_last = false 2 ranks pad the " +
            std::to_string(samples) + " training samples with a repeated one in the first epoch's last window, "
            "after its " + std::to_string(windows) + " full window(s))";
  row.reason = what + ": max relative weight difference " + format_value(trained.relative) + " at '" +
               trained.worst + "'" + moved_note(trained);
  if (batchnorm)
    row.notes.emplace_back("compared with model.freeze_bn_stats = true: with live BatchNorm statistics each rank "
                        "normalises its own half batch, which differs by design");
  const std::string padding = padding_by_design(context); // judged first: a model may mask its padding
  if (!by_design.empty()) {
    row.notes.emplace_back("training differs by design: " + by_design + "; the difference is reported, not judged");
  } else if (!(trained.relative < tolerance) && !padding.empty()) {
    row.notes.emplace_back("training differs by design: " + padding + "; the difference is reported, not judged");
  } else if (!(trained.relative < tolerance)) {
    row.status = Status::kFail;
    row.notes.emplace_back("2 ranks must train like 1 process with their batches combined: a loss returning a mean "
                        "(see the loss check), a dataset that shards itself by rank (the host's sampler already "
                        "gives each rank its share) or state that differs per rank breaks that");
  }

  double evaluated = 0;
  if (!context.parts().val_data) {
    row.notes.emplace_back("no validation split: the 2-rank evaluation was not compared");
  } else {
    const std::filesystem::path checkpoint = one.dir / "checkpoints" / "last.pt";
    const std::vector<std::string> eval_sets{"run.device=\"cpu\"", "dist.backend=\"gloo\"", "dist.timeout_s=120"};
    const ChildResult eval_one = runner.eval(dir / "eval_one_rank", checkpoint, eval_sets, 1);
    const ChildResult eval_two =
        eval_one.ok() ? runner.eval(dir / "eval_two_ranks", checkpoint, eval_sets, 2) : eval_one;
    if (!eval_one.ok() || !eval_two.ok()) {
      row.status = Status::kFail;
      row.notes.emplace_back((eval_one.ok() ? eval_two : eval_one).failure());
    } else {
      std::string problem;
      evaluated = compare_evaluations(eval_one.dir / "eval_last.json", eval_two.dir / "eval_last.json", problem);
      if (problem.empty()) {
        row.notes.emplace_back("the 2-rank evaluation of its checkpoint equals the 1-rank one: max relative "
                               "difference " + format_value(evaluated));
      } else {
        // The evaluation's failure leads the row; the training comparison becomes a note.
        row.status = Status::kFail;
        row.notes.insert(row.notes.begin(), row.reason);
        row.reason = "evaluation: " + problem + " (metric state must add across ranks, tp/iface/metric.h; see the "
                     "metric check)";
      }
    }
  }
  row.measured = "train " + format_value(trained.relative) + ", eval " + format_value(evaluated);
  return row;
}

}  // namespace tp::cli::verify
