// The metric contract (plugin_api/include/tp/iface/metric.h): every state tensor combines by
// elementwise SUM, or (ABI 1.7, gathered state) by concatenating rows, because a data-parallel
// evaluation all-reduces (gathers) the ranks' states before compute(). Measured on one batch, as
// two ranks would: the state after the whole batch against the states after each half added
// (rows: concatenated, as many as the whole batch's), and compute() on that combination against
// compute() on the whole batch. The batch is the val split's first where the run has one
// (evaluation feeds the metrics val batches), else the training split's. A running mean fails:
// two halves' means add up to twice the mean. Cost: one forward pass of the model, three updates
// and two computes of each metric.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "verify/verify.h"

namespace tp::cli::verify {
namespace {

constexpr double kMetricTolerance = 1e-5; // float32 state sums in two orders differ by ~1e-7

/// Copies of a metric's state: the summed tensors (as float64) and the gathered rows.
struct StateCopy {
  std::vector<at::Tensor> sums;
  std::vector<at::Tensor> rows;
};

/// Copies of the metric's state after update(outputs, batch) from a reset state.
StateCopy state_after(MetricProxy& metric, const NamedTensors& outputs, const NamedTensors& batch) {
  metric.reset();
  metric.update(outputs, batch);
  StateCopy copy;
  for (const StateTensor& s : metric.state())
    copy.sums.push_back(s.tensor.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true));
  for (const StateTensor& s : metric.gathered_state()) copy.rows.push_back(s.tensor.clone());
  return copy;
}

// Both NaN is agreement: a value undefined on the whole batch (a mean IoU over a batch whose every
// pixel is the ignore index) is undefined on its halves summed too.
double relative(double a, double b) {
  if (std::isnan(a) && std::isnan(b)) return 0.0;
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-12});
}

}  // namespace

CheckResult check_metric(VerifyContext& context) {
  RunComponents& parts = context.parts();
  CheckResult row("metric", "< " + format_value(kMetricTolerance) + " relative");
  if (parts.metrics.empty()) {
    row.status = Status::kSkip;
    row.reason = "the run has no [[metrics]]";
    return row;
  }
  // The metrics' own split: evaluation gives them val batches, which may hold fields training
  // batches do not (coco_detection's gt_* ground truth in the files' pixels).
  const BatchLayout* evaluated_layout = nullptr;
  const NamedTensors& batch = context.first_evaluation_batch(&evaluated_layout);
  const BatchLayout& layout = *evaluated_layout;
  const int64_t rows = batch_size(batch, layout);
  if (rows < 2) {
    row.status = Status::kSkip;
    row.reason = "needs a batch of at least 2 samples to split (train.batch_size = 1)";
    return row;
  }
  const int64_t half = rows / 2;
  c10::InferenceMode inference;
  parts.model->set_training(false);
  const NamedTensors outputs = parts.model->forward(batch);
  const NamedTensors out_a = slice_rows(outputs, half, true, "model output", output_layout(outputs));
  const NamedTensors out_b = slice_rows(outputs, half, false, "model output", output_layout(outputs));
  const NamedTensors batch_a = slice_rows(batch, half, true, "batch field", layout);
  const NamedTensors batch_b = slice_rows(batch, half, false, "batch field", layout);

  double worst_state = 0, worst_value = 0;
  std::string names;
  for (auto& metric : parts.metrics) {
    names += (names.empty() ? "" : ", ") + metric->id();
    const StateCopy whole_state = state_after(*metric, outputs, batch);
    const std::vector<at::Tensor>& whole = whole_state.sums;
    const auto whole_values = metric->compute(); // syncs, once per metric
    const StateCopy a_state = state_after(*metric, out_a, batch_a);
    const StateCopy b_state = state_after(*metric, out_b, batch_b);
    const std::vector<at::Tensor>& a = a_state.sums;
    const std::vector<at::Tensor>& b = b_state.sums;
    // What the evaluation's all-reduce does with two ranks' states: add them in place; and
    // what its gather does with their rows: rank 0's, then rank 1's.
    const std::vector<StateTensor> state = metric->state();
    for (size_t i = 0; i < state.size(); ++i) state[i].tensor.copy_(a[i] + b[i]);
    const std::vector<StateTensor> gathered = metric->gathered_state();
    for (size_t i = 0; i < gathered.size(); ++i) {
      const int64_t whole_rows = whole_state.rows[i].size(0);
      const int64_t halves_rows = a_state.rows[i].size(0) + b_state.rows[i].size(0);
      if (whole_rows != halves_rows && row.status == Status::kPass) {
        row.status = Status::kFail;
        row.reason = metric->id() + ": gathered state '" + gathered[i].name + "' has " + std::to_string(whole_rows) +
                     " rows after a batch of " + std::to_string(rows) + " but " + std::to_string(halves_rows) +
                     " after its halves: its rows must be the batch's rows, each from one sample";
      }
      gathered[i].tensor.set_(at::cat({a_state.rows[i], b_state.rows[i]}));
    }
    std::map<std::string, double> summed_values;
    for (const auto& [name, value] : metric->compute()) summed_values[name] = value;
    metric->reset();

    for (size_t i = 0; i < state.size(); ++i) {
      if (whole[i].numel() == 0) continue;
      const double scale = std::max(whole[i].abs().max().item<double>(), 1e-12);
      const double difference = (whole[i] - (a[i] + b[i])).abs().max().item<double>() / scale;
      worst_state = std::max(worst_state, difference);
      if (!(difference < kMetricTolerance) && row.status == Status::kPass) {
        row.status = Status::kFail;
        row.reason = metric->id() + ": state '" + state[i].name + "' of a batch of " + std::to_string(rows) +
                     " differs from its halves' states added by " + format_value(difference) +
                     " (relative): it does not combine by SUM";
        row.notes.emplace_back("every state tensor must add across ranks (counts, sums, confusion matrices), never a "
                            "mean or a ratio: the host all-reduces the states with SUM before compute() "
                            "(tp/iface/metric.h), so a 2-rank evaluation would report a different value");
      }
    }
    for (const auto& [name, value] : whole_values) {
      const auto found = summed_values.find(name);
      const double difference = found == summed_values.end() ? 1.0 : relative(value, found->second);
      worst_value = std::max(worst_value, difference);
      if (!(difference < kMetricTolerance) && row.status == Status::kPass) {
        row.status = Status::kFail;
        row.reason = metric->id() + ": compute() gives " + name + " = " + format_value(value) +
                     " for the whole batch but " +
                     (found == summed_values.end() ? "nothing" : format_value(found->second)) +
                     " for its halves' states added";
      }
    }
  }
  row.measured = "state " + format_value(worst_state) + ", values " + format_value(worst_value);
  if (row.status == Status::kPass)
    row.reason = names + " (a batch of " + std::to_string(rows) +
                 ", model in eval mode): each state equals its halves' states added, and compute() on that sum "
                 "equals compute() on the batch";
  return row;
}

}  // namespace tp::cli::verify
