// The loss contract (plugin_api/include/tp/iface/loss.h): a loss returns the SUM of its per-item
// losses and the item count, so that the host can add them over an accumulation window and over
// ranks and divide once. Measured on one training batch: the model's outputs (eval mode, so
// dropout and BatchNorm do not depend on the batch) are computed once, then the loss of the whole
// batch is compared with the losses of its two halves added. A loss returning a mean gives about
// half the halves' total. Cost: one forward pass of the model, three of the loss.
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>

#include "tp/framework/error.h"
#include "verify/verify.h"

namespace tp::cli::verify {
namespace {

constexpr double kLossTolerance = 1e-4; // fp32 sums in two orders differ by ~1e-6

}  // namespace

CheckResult check_loss(VerifyContext& context) {
  RunComponents& parts = context.parts();
  const NamedTensors& batch = context.first_batch();
  CheckResult row("loss", "< " + format_value(kLossTolerance) + " relative; counts exact");
  const BatchLayout& layout = parts.train_data->batch_layout();
  const int64_t rows = batch_size(batch, layout);
  if (rows < 2) {
    row.status = Status::kSkip;
    row.reason = "needs a batch of at least 2 samples to split (train.batch_size = " +
                 std::to_string(context.config().train.batch_size) + ")";
    return row;
  }
  const int64_t half = rows / 2;
  c10::InferenceMode inference;
  parts.model->set_training(false);
  const NamedTensors outputs = parts.model->forward(batch);
  const LossTerms whole = parts.loss->forward(outputs, batch);
  const LossTerms first = parts.loss->forward(slice_rows(outputs, half, true, "model output", output_layout(outputs)),
                                              slice_rows(batch, half, true, "batch field", layout));
  const LossTerms rest = parts.loss->forward(slice_rows(outputs, half, false, "model output", output_layout(outputs)),
                                             slice_rows(batch, half, false, "batch field", layout));
  // Reading the values back synchronises the device, once per check.
  const double sum = whole.sum.item<double>(), sum_a = first.sum.item<double>(), sum_b = rest.sum.item<double>();
  const double count = whole.count.item<double>(), count_a = first.count.item<double>(),
               count_b = rest.count.item<double>();
  const double scale = std::max({std::abs(sum), std::abs(sum_a) + std::abs(sum_b), 1e-30});
  const double difference = std::abs(sum - (sum_a + sum_b)) / scale;
  row.measured = format_value(difference) + "; counts " + format_value(count) + " = " + format_value(count_a) +
                 " + " + format_value(count_b);
  const std::string what = "a batch of " + std::to_string(rows) + " (model in eval mode): loss sum " +
                           format_value(sum) + ", its halves " + format_value(sum_a) + " + " + format_value(sum_b);
  if (!std::isfinite(sum) || !std::isfinite(sum_a) || !std::isfinite(sum_b)) {
    row.status = Status::kFail;
    row.reason = what + ": not finite";
    return row;
  }
  if (!(difference < kLossTolerance)) {
    row.status = Status::kFail;
    row.reason = what + " = " + format_value(sum_a + sum_b) + ": the loss is not a sum over its items";
    row.notes.emplace_back("a loss returns the SUM of its per-item losses and their count (tp/iface/loss.h); the host "
                           "adds sums and counts over micro-batches and ranks and divides once, so a mean weighs "
                           "each micro-batch and rank wrongly");
  } else if (!(count_a >= 1 && count_b >= 1)) {
    row.status = Status::kFail;
    row.reason = "item counts " + format_value(count_a) + " and " + format_value(count_b) + " for halves of " +
                 std::to_string(half) + " and " + std::to_string(rows - half) +
                 " samples: a batch with samples must count its items (tp/iface/loss.h); the host divides the loss "
                 "sum by the count, so 0 makes the loss and its gradient infinite";
  } else if (count != count_a + count_b) {
    row.status = Status::kFail;
    row.reason = "item counts " + format_value(count) + " != " + format_value(count_a) + " + " + format_value(count_b) +
                 ": the count must be the number of items the sum is over (tp/iface/loss.h)";
  } else {
    row.reason = what + "; item counts add up";
  }
  return row;
}

}  // namespace tp::cli::verify
