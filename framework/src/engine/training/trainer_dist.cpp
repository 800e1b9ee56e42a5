// The trainer's own data-parallel pieces (docs/distributed.md): the same weights on every rank
// and the same resume position. Each is collective through Collectives, the identity for a
// single process. The per-step agreement lives with the step (StepRunner), request agreement
// with RunControl, loss sums with the meters and evaluation sums with the Evaluator. BatchNorm
// statistics agree before every evaluation and save (sync_batchnorm_stats, dist.bn_stats).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "tp/framework/dist/batchnorm_sync.h"
#include "engine/training/trainer_impl.h"
#include "tp/framework/error.h"

namespace tp {

void Trainer::Impl::init_dist() {
  broadcast_model(); // same initial weights everywhere, whatever each rank's init drew
  steps_.build_gradient_reducer();
}

void Trainer::Impl::broadcast_model() {
  std::vector<at::Tensor> tensors;
  for (const auto& s : model_state_) tensors.push_back(s.tensor.detach());
  c10::NoGradGuard no_grad;
  collectives_->broadcast(tensors, "broadcast rank 0's parameters and buffers");
}

void Trainer::Impl::sync_batchnorm_stats() {
  std::vector<const std::vector<StateTensor>*> states = {&model_state_};
  for (const WeightAverage* average : update_.averages()) states.push_back(&average->state());
  sync_batchnorm_statistics(*collectives_, states, config_.dist.bn_stats);
}

void Trainer::Impl::check_same_position() {
  const at::Tensor mine = at::tensor({step(), position_.start.epoch, position_.start.batch}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor root = mine.to(device_);
  collectives_->broadcast({root}, "compare resume positions");
  if (!at::equal(root.cpu(), mine))
    throw ConfigError("", "rank " + std::to_string(rank_) + " starts at step " + std::to_string(step()) +
                              " but rank 0 at step " + std::to_string(root.cpu()[0].item<int64_t>()) +
                              ": the ranks did not load the same checkpoint. With --resume every rank must see the "
                              "same run directory (a shared file system on several nodes), and the world size "
                              "must be the one the checkpoint was written with.");
}

}  // namespace tp
