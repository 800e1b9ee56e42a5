// The run's first training samples as one batch: what a model is run on outside training where its
// declared example inputs do not fit the run's options (tp/framework/plugin/model_inputs.h):
// `host profile`, `host export`'s outputs entry and `host plugins check --config`.
#pragma once

#include <cstdint>
#include <string>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/named_tensors.h"
#include "tp/framework/plugin/registry.h"

namespace tp::cli {

/// The first `batch_size` samples of `config`'s training split (repeated when it is smaller),
/// read as worker 0 of epoch 0 with the run's seed and collated; the tensors are the host's own.
/// `command` names the caller in the error thrown for an empty split.
NamedTensors first_training_batch(const RunConfig& config, const Registry& registry, int64_t batch_size,
                                  const std::string& command);

}  // namespace tp::cli
