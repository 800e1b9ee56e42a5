#include "tp/framework/engine/checkpoint_evaluation.h"

#include <vector>

#include "engine/evaluation/evaluation_pass.h"
#include "engine/setup/image_decode_choice.h"
#include "tp/framework/engine/loader_options.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/error.h"

namespace tp {

Scalars evaluate_checkpoint(const RunConfig& config, RunComponents& parts, const EvaluatedSplit& split,
                            const NamedWeights& weights, c10::Device device, Collectives& collectives, Logger& log) {
  TP_CHECK(split.data != nullptr, "evaluate_checkpoint: the run has no '", split.name, "' split to evaluate");
  const BatchPlacement placement(device, config.run.channels_last, config.data.device_prefetch);
  const std::vector<StateTensor> model_state = placement.place_model(*parts.model);
  for (auto& metric : parts.metrics) metric->to_device(device);
  // Every rank reads the same file, so every rank holds the same weights without a broadcast
  // (restore_weights fills every tensor of the model or throws).
  restore_weights(weights, model_state);
  int64_t parameters = 0;
  for (const auto& s : model_state)
    if (!s.is_buffer) parameters += s.tensor.numel();
  log.info("model " + parts.model->id() + ": " + std::to_string(parameters) + " parameters on " + device.str());
  const DecodeChoice decode =
      choose_image_decode(config, device, *split.data, split.name, config.data.num_workers, "nothing was evaluated");
  log.info("data.decode: evaluation " + decode.state);
  DataLoader loader(split.data,
                    loader_options(config, evaluation_batch_size(config), LoaderMode::kEvalExact, collectives.rank(),
                                   collectives.world_size(), device),
                    decode.stage);
  return evaluate_split({parts, config.metrics, placement, loader, /*batch_limit=*/0, collectives}, split.name);
}

}  // namespace tp
