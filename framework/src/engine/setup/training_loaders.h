// A training run's loaders and their limits, one place (docs/engine.md): the training loader and
// its batches per epoch under train.overfit_batches and train.fast_dev_run, the evaluation loader
// the Evaluator reads and its batch limit, each with data.decode's choice. The options are
// loader_options' (tp/framework/engine/loader_options.h), the rule host eval and host predict
// read their splits with. Two steps, because the schedule's length (from the training batches)
// is settled between them.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/setup/image_decode_choice.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/util/log.h"

namespace tp {

/// The training split's loader and how much of it an epoch reads.
struct TrainingLoader {
  std::unique_ptr<DataLoader> loader;  ///< shuffled per data.shuffle, unless train.overfit_batches
  int64_t batches = 0;                 ///< micro-batches per epoch: the loader's, else overfit_batches, or
                                       ///< one optimizer step's under fast_dev_run
  DecodeChoice decode;                 ///< data.decode for the training split
};

/// The evaluation's loader and how much of it an evaluation reads.
struct EvaluationLoader {
  std::unique_ptr<DataLoader> loader;  ///< null: nothing to evaluate (no val split, eval.strategy "no")
  int64_t batches = 0;                 ///< batch limit; 0 = the whole split
  std::optional<DecodeChoice> decode;  ///< data.decode for the val split (none under overfit_batches)
};

/// [all ranks] The training loader of `parts.train_data` for rank `rank` of `world` on `device`,
/// with train.overfit_batches (unshuffled, the first N batches) and train.fast_dev_run (one
/// optimizer step) applied. Logs the training order of a source with sample groups. Throws
/// ConfigError when an epoch would hold no full batch, or overfit_batches exceeds the batches
/// there are (every rank sees the same sizes, so every rank refuses alike); data.decode's refusals.
TrainingLoader make_training_loader(const RunConfig& config, RunComponents& parts, c10::Device device, int rank,
                                    int world, Logger& log);

/// [all ranks] The evaluation loader: under train.overfit_batches the training split again,
/// unshuffled, read with `train`'s decode and limited to the same N batches; else the val split
/// (when there is one and eval.strategy is not "no") in eval.batch_size batches; one batch under
/// fast_dev_run. Logs overfit_batches' line. Throws data.decode's ConfigError.
EvaluationLoader make_evaluation_loader(const RunConfig& config, RunComponents& parts, const TrainingLoader& train,
                                        c10::Device device, int rank, int world, Logger& log);

}  // namespace tp
