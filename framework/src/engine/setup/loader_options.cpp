#include "tp/framework/engine/loader_options.h"

namespace tp {

LoaderOptions loader_options(const RunConfig& config, int64_t batch_size, LoaderMode mode, int rank, int world,
                             c10::Device device) {
  return LoaderOptions()
      .batch_size(batch_size)
      .num_workers(config.data.num_workers)
      .prefetch(config.data.prefetch)
      .drop_last(mode == LoaderMode::kTrain && config.train.drop_last)
      .shuffle(mode == LoaderMode::kTrain && config.data.shuffle)
      .seed(static_cast<uint64_t>(config.run.seed))
      .rank(rank)
      .world_size(world)
      .mode(mode)
      .pin_memory(device.is_cuda())
      .on_bad_sample(config.data.on_bad_sample)
      .sample_timeout_s(config.data.sample_timeout_s)
      .group_window(config.data.group_window);
}

int64_t evaluation_batch_size(const RunConfig& config) {
  return config.eval.batch_size > 0 ? config.eval.batch_size : config.train.batch_size;
}

}  // namespace tp
