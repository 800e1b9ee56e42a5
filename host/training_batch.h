// The inputs a model is run on outside training: its declared example inputs, or the run's first
// training samples as one batch where the examples do not fit the run's options (an `image_size`,
// an `in_features`): `host profile`, `host export`'s outputs entry and `host plugins check --config`.
#pragma once

#include <cstdint>
#include <string>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/named_tensors.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/registry.h"

namespace tp::cli {

/// The first `batch_size` samples of `config`'s training split (repeated when it is smaller),
/// read as worker 0 of epoch 0 with the run's seed and collated; the tensors are the host's own.
/// `command` names the caller in the error thrown for an empty split.
NamedTensors first_training_batch(const RunConfig& config, const Registry& registry, int64_t batch_size,
                                  const std::string& command);

/// A model's outputs on the inputs that served, and why its examples did not ("" when they did).
struct ModelRun {
  NamedTensors inputs, outputs;
  std::string why_not_examples;
};

/// Runs `model` (component `info`, in the mode and grad mode the caller set) forward on
/// `batch_size` rows of its declared examples, or, where it declares none or they fail, on
/// first_training_batch. Throws Error naming the model and both failures when neither runs.
ModelRun run_on_model_inputs(ModelProxy& model, const ComponentInfo& info, const RunConfig& config,
                             const Registry& registry, int64_t batch_size, const std::string& command);

}  // namespace tp::cli
