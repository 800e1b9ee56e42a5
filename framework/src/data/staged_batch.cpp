#include "data/staged_batch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "tp/framework/data/sampler.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

/// `batch` without the rows in `drop` (sorted): every field is stacked here (checked).
NamedTensors without_rows(NamedTensors batch, const std::vector<std::size_t>& drop, int64_t rows) {
  std::vector<int64_t> keep;
  for (int64_t r = 0; r < rows; ++r)
    if (!std::binary_search(drop.begin(), drop.end(), static_cast<std::size_t>(r))) keep.push_back(r);
  if (keep.empty()) return {};
  const at::Tensor index = at::tensor(keep, at::kLong);
  for (auto& [name, tensor] : batch) {
    TP_CHECK(tensor.dim() >= 1 && tensor.size(0) == rows, "data.on_bad_sample = \"skip\" with data.decode = \"gpu\": "
             "field '", name, "' is not one row per sample, so a failed image cannot be dropped from its batch; "
             "use data.on_bad_sample = \"fail\" or data.decode = \"cpu\" for this dataset");
    tensor = tensor.index_select(0, index.to(tensor.device()));
  }
  return batch;
}

}  // namespace

BatchLayout with_ragged(const BatchLayout& layout, const std::vector<std::string>& ragged) {
  if (ragged.empty()) return layout;
  std::vector<FieldBatching> fields = layout.fields();
  for (const std::string& name : ragged)
    if (layout.find(name) == nullptr) fields.push_back({name, Batching::kRagged, 0.0});
  return BatchLayout(std::move(fields));
}

NamedTensors run_stage(const BatchStage& stage, NamedTensors batch, const StageContext& context,
                       std::vector<SkippedSample>& skipped) {
  const auto rows = static_cast<int64_t>(context.dataset_indices.size());
  const BatchStage::Refetch refetch = [&context](std::size_t row) {
    tp_worker_ctx_t ctx = context.ctx;
    const uint64_t index = context.dataset_indices[row];
    ctx.seed = sample_seed(context.options.seed(), context.options.rank(), ctx.epoch, index);
    ctx.encoded_images = 0;
    return context.source.get(index, ctx);
  };
  std::vector<BatchStage::FailedRow> failed;
  NamedTensors out = stage.run(std::move(batch), context.ctx.worker, refetch, failed);
  if (failed.empty()) return out;
  std::sort(failed.begin(), failed.end());
  if (context.options.on_bad_sample() != BadSamplePolicy::kSkip) {
    const auto& [row, message] = failed.front();
    const uint64_t index = context.dataset_indices[row];
    throw SampleError(context.source.name(), index,
                      detail::concat("data loader: source '", context.source.name(), "' failed on sample ", index,
                                     " (epoch ", context.ctx.epoch + 1, ", rank ", context.options.rank(),
                                     "), decoded on the device and again on the CPU: ", message,
                                     " (set data.on_bad_sample = \"skip\" to drop failing samples and count them "
                                     "instead)"));
  }
  std::vector<std::size_t> drop;
  for (const auto& [row, message] : failed) {
    drop.push_back(row);
    skipped.push_back({context.dataset_indices[row], message});
  }
  return without_rows(std::move(out), drop, rows);
}

}  // namespace tp
