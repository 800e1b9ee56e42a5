// The loader's side of a BatchStage (batch_stage.h): the collate layout with the stage's encoded
// fields ragged, and running the stage on a collated batch with the rows it fails handled as bad
// samples. Private to the data loader.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"
#include "tp/framework/data/batch_stage.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/data/sample_source.h"

namespace tp {

/// `layout` with every name of `ragged` added as a ragged field (a name it lists already keeps
/// its entry).
BatchLayout with_ragged(const BatchLayout& layout, const std::vector<std::string>& ragged);

/// What run_stage needs of the batch's loading: borrowed for the call.
struct StageContext {
  const SampleSource& source;
  const LoaderOptions& options;
  const tp_worker_ctx_t& ctx;            ///< the batch's context, encoded_images = 0 (a refetch asks for pixels)
  std::span<const uint64_t> dataset_indices; ///< row i's dataset index
};

/// [worker] `stage` run on the collated `batch`. Rows the stage could not make: under
/// BadSamplePolicy::kSkip they leave the batch (every stacked field's row; appended to `skipped`,
/// an empty batch when none is left), under kFail the first throws SampleError naming the sample.
/// Throws tp::Error for a skip the batch cannot take (a ragged or padded field beside the image).
NamedTensors run_stage(const BatchStage& stage, NamedTensors batch, const StageContext& context,
                       std::vector<SkippedSample>& skipped);

}  // namespace tp
