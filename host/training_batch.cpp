#include "training_batch.h"

#include <vector>

#include "tp/framework/data/collate.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"

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

}  // namespace tp::cli
