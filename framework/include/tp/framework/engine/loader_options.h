// A run's loader options from its configuration: the training loader's and an evaluation
// loader's, one rule for the Trainer, evaluate_checkpoint (`host eval`) and `host predict`, so
// that an evaluated or predicted checkpoint sees the batches the run's own evaluation saw.
// Implemented in framework/src/engine/setup/loader_options.cpp.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"

namespace tp {

/// The data.* loader keys for a loader of `mode` with `batch_size` on rank `rank` of `world`:
/// shuffling and drop_last only in kTrain (data.shuffle, train.drop_last), pinned memory when
/// `device` is CUDA.
LoaderOptions loader_options(const RunConfig& config, int64_t batch_size, LoaderMode mode, int rank, int world,
                             c10::Device device);

/// The evaluation batch size: eval.batch_size when set (> 0), else train.batch_size. The sums are
/// taken per batch, so the batch size is part of an evaluation's exact numbers.
int64_t evaluation_batch_size(const RunConfig& config);

}  // namespace tp
