#include "batch_answer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "answer_outputs.h"

namespace tp::infer::detail {
namespace {

// `host predict`'s rule (predictor.cpp, is_classification): a floating [N, C] output named
// logits or *_logits.
bool is_classification(const std::string& name, const at::Tensor& output) {
  const bool named = name == "logits" || (name.size() > 7 && name.ends_with("_logits"));
  return named && output.dim() == 2 && output.is_floating_point();
}

}  // namespace

ReadSamples read_samples(const DatasetProxy& data) {
  const auto count = static_cast<int64_t>(data.size());
  ReadSamples read;
  read.samples.resize(static_cast<std::size_t>(count));
  read.failures.resize(static_cast<std::size_t>(count));
  const auto read_range = [&](int64_t begin, int64_t end, uint32_t worker, uint32_t workers) {
    tp_worker_ctx_t context{};
    context.struct_size = sizeof(tp_worker_ctx_t);
    context.worker = worker;
    context.num_workers = workers;
    for (int64_t index = begin; index < end; ++index) {
      const auto at = static_cast<std::size_t>(index);
      try {
        read.samples[at] = data.get(static_cast<uint64_t>(index), context);
      } catch (...) {
        read.failures[at] = std::current_exception();
      }
    }
  };
  if (data.serial() || count < 2 || at::get_num_threads() < 2) {
    read_range(0, count, 0, 1);
  } else {
    const auto workers = static_cast<uint32_t>(at::get_num_threads());
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      read_range(begin, end, static_cast<uint32_t>(at::get_thread_num()), workers);
    });
  }
  return read;
}

Batch answer(ModelProxy& model, const BatchPlacement& placement, const NamedTensors& inputs, const BatchLayout* files,
             int top_k, const std::vector<std::string>& classes, bool sigmoid_scores) {
  if (top_k < 0) throw Error("tp::infer: top_k is " + std::to_string(top_k) + "; give 0 or more.", Error::Kind::BadInput);
  c10::InferenceMode inference;
  const NamedTensors outputs = model.forward(placement.to_device(inputs));
  Batch batch;
  for (const auto& [name, tensor] : outputs)
    for (Tensor& out : answer_outputs(name, tensor, inputs, files)) batch.outputs.push_back(std::move(out));
  const int64_t rows = batch_size(inputs, files != nullptr ? *files : BatchLayout{});
  for (int64_t row = 0; row < rows; ++row) batch.rows.push_back(row);
  const auto classifier = std::find_if(outputs.begin(), outputs.end(), [](const auto& output) {
    return is_classification(output.first, output.second);
  });
  if (classifier == outputs.end() || top_k == 0) return batch;
  // As `host predict`'s logits.prob: softmax in float32 on the output's device; each class's own
  // sigmoid for a model a binary cross entropy trained (multi-label: the labels above 0.5 apply).
  const at::Tensor probabilities = sigmoid_scores ? classifier->second.to(at::kFloat).sigmoid()
                                                  : at::softmax(classifier->second.to(at::kFloat), 1);
  const int64_t k = std::min<int64_t>(top_k, probabilities.size(1));
  const auto [values, indices] = at::topk(probabilities, k, 1);
  const at::Tensor p = values.to(at::kCPU).contiguous(), c = indices.to(at::kCPU).contiguous();
  // host predict's argmax -1 (class_columns.cpp): a row with a NaN score has no best class, where
  // topk would rank the NaN first and name its class as confidently as a real answer.
  const at::Tensor no_class = probabilities.isnan().any(1).to(at::kCPU).contiguous();
  for (int64_t row = 0; row < p.size(0); ++row) {
    std::vector<ClassScore>& scores = batch.top.emplace_back();
    if (no_class[row].item<bool>()) continue;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t index = c[row][j].item<int64_t>();
      // host predict's rule (prediction_writer.cpp): names only when there is one per class of the output.
      const bool named = static_cast<int64_t>(classes.size()) == probabilities.size(1) && index >= 0;
      scores.push_back({index, named ? classes[static_cast<std::size_t>(index)] : "", p[row][j].item<float>()});
    }
  }
  return batch;
}

}  // namespace tp::infer::detail
