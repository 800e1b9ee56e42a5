// The inputs a model is run on outside training (`host plugins check`, `host profile`, `host
// export`'s outputs entry): its declared example inputs or, where it declares none or they do not
// fit the run's options (an `image_size`, an `in_features`), a batch the caller supplies: the
// run's first training samples. One rule for every command, so each names the same inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tp/entry.h"
#include "tp/framework/data/named_tensors.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"

namespace tp {

/// A batch of `batch_size` built from declared example inputs: reproducible random values from a
/// private generator (floats in [0, 1), integer fields in [0, class_count)), so the global
/// generator, which seeds initialisation, does not move. Empty when none are declared.
NamedTensors example_batch(const std::vector<tp_example_input_t>& examples, int64_t batch_size);

/// A model's outputs on the inputs that served, and why its examples did not ("" when they did).
struct ModelRun {
  NamedTensors inputs, outputs;
  std::string why_not_examples;
};

/// The batch a model falls back to (the run's first training samples); an empty function: none.
using FallbackInputs = std::function<NamedTensors()>;

/// Runs `model` (component `info`, in the mode and grad mode the caller set) forward on
/// `batch_size` rows of its declared examples or, where it declares none or they fail, on
/// `fallback()`. Without a fallback, an examples failure is rethrown as it is and a model that
/// declares none gives nullopt; with one, the result is never nullopt and Error names the model
/// and both reasons when neither runs.
/// Example:
///   ModelRun run = *run_on_model_inputs(model, *entry.info, 2, [&] { return first_samples(); });
std::optional<ModelRun> run_on_model_inputs(ModelProxy& model, const ComponentInfo& info, int64_t batch_size,
                                            const FallbackInputs& fallback);

}  // namespace tp
