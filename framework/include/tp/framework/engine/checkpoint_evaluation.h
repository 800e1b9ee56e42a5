// Evaluation of a checkpoint's weights with what an evaluation needs and nothing of training
// (docs/engine.md, "Evaluating a checkpoint"): the model placed and filled, the split's loader, one
// pass of the loss and the metrics, summed over the ranks. `host eval` calls it; no optimizer,
// schedule, training loader, averages or run-directory file is built or written, so a checkpoint
// evaluates wherever its model and split can be created, and the run it came from is left as it
// trained.
//
// Example:
//   const Scalars values = evaluate_checkpoint(config, parts, {parts.val_data, "val"},
//                                              checkpoint.weights("ema", "--weights"), device, collectives, log);
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/scalars.h"
#include "tp/framework/util/log.h"

namespace tp {

class Collectives;

/// The split a checkpoint is evaluated on.
struct EvaluatedSplit {
  std::shared_ptr<DatasetProxy> data; ///< its dataset (RunComponents::val_data, test_data); not null
  std::string name;                   ///< "val" or "test": the values' prefix, and the split data.decode names
};

/// [all ranks] Evaluates `weights` (one set of a checkpoint's weights: LoadedCheckpoint::weights,
/// the live ones or an average) on `split`: the model moved to `device` in float32 (as the run's
/// own evaluations, without autocast: amp.precision plays no part) with run.channels_last and
/// data.device_prefetch's copy stream, filled with `weights`; the split's loader with the data.*
/// keys, every sample once over the ranks, eval.batch_size (else train.batch_size) and data.decode;
/// then evaluate_split's one pass, every collective through `collectives` (the run's,
/// make_collectives): over a process group every rank loads the same weights and the sums are
/// over the ranks, so every rank returns the single-process values.
/// Returns "<name>/loss", "<name>/loss/<term>", "<name>/<metric>": the values the run logged for
/// the same weights and batch size. Logs the model's line and data.decode's. Writes no file.
/// Throws tp::Error when `weights` do not match the model (names one to one, shapes), ConfigError
/// for data.decode = "gpu" that cannot apply, PluginError from the components.
Scalars evaluate_checkpoint(const RunConfig& config, RunComponents& parts, const EvaluatedSplit& split,
                            const NamedWeights& weights, c10::Device device, Collectives& collectives, Logger& log);

}  // namespace tp
