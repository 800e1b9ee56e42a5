#include "engine/training/evaluator.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/dist/collectives.h"
#include "engine/training/batch_error.h"
#include "tp/framework/error.h"

namespace tp {

Evaluator::Evaluator(const RunConfig& config, RunComponents& parts, const BatchPlacement& placement,
                     std::unique_ptr<DataLoader> loader, int64_t batches, Collectives& collectives)
    : config_(config),
      parts_(parts),
      placement_(placement),
      loader_(std::move(loader)),
      batches_(batches),
      collectives_(collectives),
      early_stopping_(config.early_stopping) {}

void Evaluator::add_average(const WeightAverage& average, const std::vector<StateTensor>& model_state) {
  averages_.push_back(&average);
  model_state_ = &model_state;
}

Scalars Evaluator::evaluate(const std::string& prefix) {
  parts_.model->set_training(false);
  for (auto& metric : parts_.metrics) metric->reset();
  auto options = at::TensorOptions().dtype(at::kDouble).device(placement_.device());
  at::Tensor loss_sum = at::zeros({}, options), count = at::zeros({}, options);
  std::vector<std::string> term_names; // the loss's named terms (LossTerms::terms), summed like the loss
  at::Tensor term_sums;
  {
    // Inference mode: no autograd bookkeeping at all (cheaper than no_grad).
    c10::InferenceMode inference;
    loader_->start_epoch(0);
    int64_t batches = 0;
    while (auto cpu_batch = loader_->next()) {
      if (cpu_batch->empty()) { // every sample skipped: nothing to evaluate, but it is a batch
        if (++batches == batches_) break;
        continue;
      }
      const NamedTensors batch = placement_.to_device(std::move(*cpu_batch));
      // A failure names the component, the evaluation and the fields (batch_error.h); the
      // lambdas that describe it run only when a call throws.
      const auto phase = [&] {
        return "the evaluation '" + prefix + "' (batch " + std::to_string(batches + 1) +
               (collectives_.world_size() > 1 ? ", rank " + std::to_string(collectives_.rank()) : "") + ")";
      };
      const NamedTensors outputs = with_batch_context([&] { return parts_.model->forward(batch); }, [&] {
        return BatchFailure{"model", parts_.model->id(), "forward", phase(), "[model]", {{"inputs", &batch}}};
      });
      const LossTerms terms = with_batch_context([&] { return parts_.loss->forward(outputs, batch); }, [&] {
        return BatchFailure{"loss", parts_.loss->id(), "forward", phase(), "[loss]",
                            {{"outputs", &outputs}, {"targets", &batch}}};
      });
      loss_sum.add_(terms.sum.to(at::kDouble));
      count.add_(terms.count.to(at::kDouble));
      if (!terms.terms.empty()) {
        std::vector<at::Tensor> values;
        for (const auto& [name, value] : terms.terms) values.push_back(value.to(at::kDouble));
        if (!term_sums.defined()) {
          for (const auto& [name, value] : terms.terms) term_names.push_back(name);
          term_sums = at::zeros({static_cast<int64_t>(values.size())}, options);
        }
        term_sums.add_(at::stack(values));
      }
      for (std::size_t i = 0; i < parts_.metrics.size(); ++i)
        with_batch_context([&] { parts_.metrics[i]->update(outputs, batch); }, [&] {
          return BatchFailure{"metric", parts_.metrics[i]->id(), "update", phase(), config_.metrics[i].key_path,
                              {{"outputs", &outputs}, {"targets", &batch}}};
        });
      if (++batches == batches_) break; // overfit_batches / fast_dev_run
    }
  }
  // Exact evaluation: the shards are disjoint and cover the split once, so sums of the loss,
  // the item count and every metric's state are the single-process values.
  std::vector<at::Tensor> tensors{loss_sum, count};
  if (term_sums.defined()) tensors.push_back(term_sums);
  for (auto& metric : parts_.metrics)
    for (const auto& s : metric->state()) tensors.push_back(s.tensor);
  collectives_.all_reduce_sum(tensors, "sum evaluation loss and metric state over ranks");
  // Rows that do not add up (ABI 1.7: scored detections) are concatenated instead; the metric
  // keeps a key to sort them by, so rank order does not change its values.
  if (collectives_.world_size() > 1)
    for (auto& metric : parts_.metrics)
      for (auto& s : metric->gathered_state()) {
        // Named in a refusal, so a user with several metrics knows whose rows do not match.
        const std::string what = "gather the rows '" + s.name + "' of metric " + metric->id() + " over ranks";
        s.tensor.set_(collectives_.all_gather_rows(s.tensor, what.c_str()));
      }
  Scalars result;
  result.emplace_back(prefix + "/loss", (loss_sum / count).item<double>()); // sync, once per evaluation
  if (term_sums.defined()) {
    const at::Tensor means = (term_sums / count).cpu();
    for (std::size_t i = 0; i < term_names.size(); ++i)
      result.emplace_back(prefix + "/loss/" + term_names[i], means[static_cast<int64_t>(i)].item<double>());
  }
  for (auto& metric : parts_.metrics)
    for (const auto& [name, value] : metric->compute()) result.emplace_back(prefix + "/" + name, value);
  parts_.model->set_training(true);
  return result;
}

Scalars Evaluator::run(int64_t step, LrScheduler& scheduler) {
  Scalars eval = evaluate();
  for (const WeightAverage* average : averages_) {
    if (average->updates() == 0 && average->name() == "swa") continue; // SWA has not started yet
    const SwappedInAverage swapped(*average, *model_state_);
    const Scalars averaged = evaluate("val_" + average->name());
    eval.insert(eval.end(), averaged.begin(), averaged.end());
  }
  last_ = eval;
  last_step_ = step;
  monitor_.reset();
  for (const auto& [name, value] : eval) {
    if (name == config_.schedule.monitor) scheduler.step_metric(value);
    if (name == config_.checkpoint.monitor) monitor_ = value;
  }
  const bool average_not_started = std::any_of(averages_.begin(), averages_.end(), [&](const WeightAverage* a) {
    return a->updates() == 0 && config_.checkpoint.monitor.starts_with("val_" + a->name() + "/");
  });
  if (!monitor_ && !average_not_started && config_.checkpoint.save_top_k > 0 && !config_.train.fast_dev_run) {
    std::string names;
    for (const auto& [name, value] : eval) names += (names.empty() ? "" : ", ") + name;
    throw ConfigError("checkpoint.monitor", "checkpoint.monitor = \"" + config_.checkpoint.monitor +
                                                "\" is not among the evaluated values (" + names +
                                                "). Set it to one of them, or checkpoint.save_top_k = 0.");
  }
  return eval;
}

}  // namespace tp
