#include "training_batch.h"

#include <vector>

#include "tp/framework/data/collate.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/profile/model_profile.h"

namespace tp::cli {

NamedTensors first_training_batch(const RunConfig& config, const Registry& registry, int64_t batch_size,
                                  const std::string& command) {
  DatasetProxy dataset(registry.find(config.data.train.component, TP_KIND_DATASET, config.data.train.key_path),
                       config.data.train, "train");
  if (dataset.size() == 0)
    throw Error(command + ": the training split (" + config.data.train.component +
                ") is empty, so there is no batch to run the model on.");
  std::vector<NamedTensors> samples;
  for (int64_t i = 0; i < batch_size; ++i) {
    const uint64_t index = static_cast<uint64_t>(i) % dataset.size();
    const tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, static_cast<uint64_t>(config.run.seed) + index};
    samples.push_back(dataset.get(index, ctx));
  }
  CollateOptions options;
  options.layout = &dataset.batch_layout();
  // Collating stacks into new tensors, but a field may be handed through as it came: cloned so
  // no tensor outlives the dataset plugin's library (plugins check unloads it before the model's).
  NamedTensors batch = collate(std::move(samples), options);
  for (auto& [name, tensor] : batch) tensor = tensor.clone();
  return batch;
}

ModelRun run_on_model_inputs(ModelProxy& model, const ComponentInfo& info, const RunConfig& config,
                             const Registry& registry, int64_t batch_size, const std::string& command) {
  ModelRun run;
  run.why_not_examples = "it declares no example inputs";
  if (!info.examples.empty()) {
    try {
      run.inputs = example_batch(info.examples, batch_size);
      run.outputs = model.forward(run.inputs);
      run.why_not_examples.clear();
      return run;
    } catch (const std::exception& e) {
      run.why_not_examples = std::string("its example inputs do not fit the run's options: ") + e.what();
    }
  }
  try {
    run.inputs = first_training_batch(config, registry, batch_size, command);
    run.outputs = model.forward(run.inputs);
    return run;
  } catch (const std::exception& e) {
    throw Error("the model '" + config.model.component + "' could not be run: " + run.why_not_examples +
                ", and on the run's first training samples: " + e.what());
  }
}

}  // namespace tp::cli
