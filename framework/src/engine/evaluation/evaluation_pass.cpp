#include "engine/evaluation/evaluation_pass.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/training/batch_error.h"
#include "tp/framework/error.h"
#include "tp/framework/dist/collectives.h"

namespace tp {
namespace {

/// [all ranks] The loss's `count` term names where some ranks have none (a shard without a
/// batch): each rank's names as bytes, gathered in rank order; the first `count` are the first
/// rank's that had them (every rank runs the same loss).
std::vector<std::string> term_names_from_ranks(Collectives& collectives, const std::vector<std::string>& own,
                                               std::size_t count, c10::Device device) {
  std::string joined;
  for (const std::string& name : own) joined += name + '\n';
  at::Tensor rows = at::empty({static_cast<int64_t>(joined.size()), 1}, at::TensorOptions().dtype(at::kByte));
  std::copy(joined.begin(), joined.end(), rows.data_ptr<uint8_t>());
  const at::Tensor all = collectives.all_gather_rows(rows.to(device), "agree on the loss's term names over ranks").cpu();
  const std::string bytes(reinterpret_cast<const char*>(all.data_ptr<uint8_t>()), static_cast<std::size_t>(all.numel()));
  std::vector<std::string> names;
  for (std::size_t start = 0; names.size() < count && start < bytes.size();) {
    const std::size_t end = bytes.find('\n', start);
    names.push_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

}  // namespace

Scalars evaluate_split(const EvaluationPass& pass, const std::string& prefix) {
  RunComponents& parts = pass.parts;
  Collectives& collectives = pass.collectives;
  parts.model->set_training(false);
  for (auto& metric : parts.metrics) metric->reset();
  auto options = at::TensorOptions().dtype(at::kDouble).device(pass.placement.device());
  at::Tensor loss_sum = at::zeros({}, options), count = at::zeros({}, options);
  std::vector<std::string> term_names; // the loss's named terms (LossTerms::terms), summed like the loss
  at::Tensor term_sums;
  uint32_t stop_flags = 0;
  {
    // Inference mode: no autograd bookkeeping at all (cheaper than no_grad).
    std::optional<c10::InferenceMode> inference;
    std::optional<c10::NoGradGuard> no_grad;
    if (pass.inference_mode) inference.emplace();
    else no_grad.emplace();
    // Shards differ by a batch and a rank may stop early: a plugin's collective could not be
    // matched, so its tp.dist/2 calls are local for the batches (the sums below are the host's).
    const LocalPluginCalls local_plugin_calls(collectives);
    pass.loader.start_epoch(0);
    int64_t batches = 0;
    // A stop signal: this rank fetches no more; the others learn of it in the header all-reduce.
    while (!(pass.stop_flags && (stop_flags = pass.stop_flags()) != 0)) {
      auto cpu_batch = pass.loader.next();
      if (!cpu_batch) break;
      if (cpu_batch->empty()) { // every sample skipped: nothing to evaluate, but it is a batch
        if (++batches == pass.batch_limit) break;
        continue;
      }
      const NamedTensors batch = pass.placement.to_device(std::move(*cpu_batch));
      // A failure names the component, the evaluation and the fields (batch_error.h); the
      // lambdas that describe it run only when a call throws.
      const auto phase = [&] {
        return (pass.phase.empty() ? "the evaluation '" + prefix + "'" : pass.phase) + " (batch " + std::to_string(batches + 1) +
               (collectives.world_size() > 1 ? ", rank " + std::to_string(collectives.rank()) : "") + ")";
      };
      const NamedTensors outputs = with_batch_context([&] { return parts.model->forward(batch); }, [&] {
        return BatchFailure{"model", parts.model->id(), "forward", phase(), "[model]", {{"inputs", &batch}}};
      });
      const LossTerms terms = with_batch_context([&] { return parts.loss->forward(outputs, batch); }, [&] {
        return BatchFailure{"loss", parts.loss->id(), "forward", phase(), "[loss]",
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
      for (std::size_t i = 0; i < parts.metrics.size(); ++i)
        with_batch_context([&] { parts.metrics[i]->update(outputs, batch); }, [&] {
          return BatchFailure{"metric", parts.metrics[i]->id(), "update", phase(), pass.metric_tables[i].key_path,
                              {{"outputs", &outputs}, {"targets", &batch}}};
        });
      if (++batches == pass.batch_limit) break; // overfit_batches / fast_dev_run
    }
  }
  // 1. What every rank sends alike, first: the stop flags' bits, and whether this rank has the
  //    loss's named terms and how many. A rank that stopped before its first batch, or saw none
  //    (an empty shard, every sample skipped), has no terms, so the lists of step 2 would not line
  //    up and the ranks would wait in the all-reduce for dist.timeout_s (the review of 0d612c0).
  //    A single process decides alone.
  if (collectives.world_size() > 1) {
    std::vector<double> header(34, 0.0);
    for (int bit = 0; bit < 32; ++bit) header[bit] = (stop_flags >> bit) & 1u;
    header[32] = term_sums.defined() ? 1.0 : 0.0;
    header[33] = term_sums.defined() ? static_cast<double>(term_sums.numel()) : 0.0;
    std::vector<at::Tensor> agreed{at::tensor(header, at::TensorOptions().dtype(at::kDouble)).to(options.device())};
    collectives.all_reduce_sum(agreed, "agree on the evaluation's stop and the loss's terms over ranks");
    const at::Tensor summed = agreed.front().cpu(); // a sync, once per evaluation
    const auto sums = summed.accessor<double, 1>();
    stop_flags = 0;
    for (int bit = 0; bit < 32; ++bit)
      if (sums[bit] > 0) stop_flags |= 1u << bit;
    if (const double with_terms = sums[32]; with_terms > 0 && with_terms < collectives.world_size()) {
      const auto terms = static_cast<std::size_t>(sums[33] / with_terms); // the same loss everywhere
      term_names = term_names_from_ranks(collectives, term_names, terms, options.device());
      if (!term_sums.defined()) term_sums = at::zeros({static_cast<int64_t>(terms)}, options);
    }
  }
  if (pass.stop_flags) {
    *pass.stopped = stop_flags;
    if (stop_flags != 0) return {}; // every rank: abandoned, its values never computed
  }
  // 2. Exact evaluation: the shards are disjoint and cover the split once, so sums of the loss,
  //    the item count and every metric's state are the single-process values.
  //    data.on_bad_sample = "skip": the samples the metrics do not cover, summed like them.
  const at::Tensor skipped = at::full({}, static_cast<double>(pass.loader.skipped_count()), options);
  std::vector<at::Tensor> tensors{loss_sum, count, skipped};
  if (term_sums.defined()) tensors.push_back(term_sums);
  for (auto& metric : parts.metrics)
    for (const auto& s : metric->state()) tensors.push_back(s.tensor);
  collectives.all_reduce_sum(tensors, "sum evaluation loss and metric state over ranks");
  // Rows that do not add up (ABI 1.7: scored detections) are concatenated instead; the metric
  // keeps a key to sort them by, so rank order does not change its values.
  if (collectives.world_size() > 1)
    for (auto& metric : parts.metrics)
      for (auto& s : metric->gathered_state()) {
        // Named in a refusal, so a user with several metrics knows whose rows do not match.
        const std::string what = "gather the rows '" + s.name + "' of metric " + metric->id() + " over ranks";
        s.tensor.set_(collectives.all_gather_rows(s.tensor, what.c_str()));
      }
  // Every sample skipped: the values would be NaN, which a monitor reads as "no improvement"
  // and a script as a finished evaluation (data trial F1). Only a pass over the whole split can
  // say so: the sanity check's first batches may all be bad where the rest are not (a Mac's
  // AppleDouble "._" twins sort first, data trial F24).
  if (const double dropped = skipped.item<double>(); pass.batch_limit == 0 && dropped > 0 && count.item<double>() == 0) {
    throw Error(with_skipped_samples("evaluation (" + prefix + "/*): every sample failed to load (" + std::to_string(static_cast<int64_t>(dropped)) +
                " skipped under data.on_bad_sample = \"skip\"), so there is nothing to score. Fix the split's files or "
                "the dataset's settings (a wrong root, extensions or decoder), or set data.on_bad_sample = \"fail\" to "
                "stop at the first. The first failures" +
                (collectives.world_size() > 1 ? " on rank " + std::to_string(collectives.rank()) : std::string()) + ":",
                pass.loader.first_skipped()));
  }
  Scalars result;
  result.emplace_back(prefix + "/loss", (loss_sum / count).item<double>()); // sync, once per evaluation
  if (term_sums.defined()) {
    const at::Tensor means = (term_sums / count).cpu();
    for (std::size_t i = 0; i < term_names.size(); ++i)
      result.emplace_back(prefix + "/loss/" + term_names[i], means[static_cast<int64_t>(i)].item<double>());
  }
  // Each value once: two [[metrics]] reporting one name (accuracy twice, the second's top_k set to
  // 1) wrote a history record with the key twice, which the host's own reader refuses.
  std::map<std::string, std::size_t> reported_by;
  for (std::size_t i = 0; i < parts.metrics.size(); ++i)
    for (const auto& [name, value] : parts.metrics[i]->compute()) {
      const auto [it, first] = reported_by.emplace(name, i);
      if (!first)
        throw ConfigError(pass.metric_tables[i].key_path,
                          pass.metric_tables[it->second].key_path + " (" + parts.metrics[it->second]->id() + ") and " +
                              pass.metric_tables[i].key_path + " (" + parts.metrics[i]->id() + ") both report '" +
                              prefix + "/" + name + "'. Keep one of them, or give them options that report "
                              "different values (top_k, a class, an average).");
      result.emplace_back(prefix + "/" + name, value);
    }
  if (const double dropped = skipped.item<double>(); dropped > 0) result.emplace_back(prefix + "/skipped_samples", dropped);
  return result;
}

}  // namespace tp
