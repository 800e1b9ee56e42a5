// The trainer's own data-parallel pieces (docs/distributed.md): the same weights on every rank
// and the same resume position. Each is a no-op without dist_, so a single process creates no
// process group and does no extra work; with it, each is collective. The per-step agreement
// lives with the step (StepRunner), request agreement with the callbacks (EventDispatcher),
// loss sums with the meters and evaluation sums with the Evaluator. BatchNorm statistics agree
// before every evaluation and save (sync_batchnorm_stats, dist.bn_stats).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "tp/framework/dist/batchnorm_sync.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"

namespace tp {

void Trainer::init_dist() {
  if (!dist_) return;
  broadcast_model(); // same initial weights everywhere, whatever each rank's init drew
  steps_.start_data_parallel();
}

void Trainer::broadcast_model() {
  if (!dist_) return;
  std::vector<at::Tensor> tensors;
  for (const auto& s : model_state_) tensors.push_back(s.tensor.detach());
  c10::NoGradGuard no_grad;
  dist_->broadcast(tensors, "broadcast rank 0's parameters and buffers");
}

void Trainer::sync_batchnorm_stats() {
  if (!dist_) return;
  std::vector<const std::vector<StateTensor>*> states = {&model_state_};
  for (const WeightAverage* average : {ema_.get(), swa_.get()})
    if (average) states.push_back(&average->state());
  sync_batchnorm_statistics(*dist_, states,
                            config_.dist.bn_stats == "reduce" ? BatchNormSync::kReduce : BatchNormSync::kBroadcast);
}

void Trainer::check_same_position() {
  if (!dist_) return;
  const at::Tensor mine = at::tensor({step_, start_epoch_, start_batch_}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor root = mine.to(device_);
  dist_->broadcast({root}, "compare resume positions");
  if (!at::equal(root.cpu(), mine))
    throw ConfigError("", "rank " + std::to_string(rank_) + " starts at step " + std::to_string(step_) +
                              " but rank 0 at step " + std::to_string(root.cpu()[0].item<int64_t>()) +
                              ": the ranks did not load the same checkpoint. With --resume every rank must see the "
                              "same run directory (a shared file system on several nodes), and the world size "
                              "must be the one the checkpoint was written with.");
}

}  // namespace tp
