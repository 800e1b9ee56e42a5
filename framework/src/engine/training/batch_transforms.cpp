#include "engine/training/batch_transforms.h"

#include <c10/core/GradMode.h>

#include <utility>

namespace tp {

NamedTensors apply_batch_transforms(const std::vector<std::unique_ptr<BatchTransformProxy>>& transforms,
                                    NamedTensors batch, const BatchTransformPosition& at) {
  if (transforms.empty()) return batch;
  const c10::NoGradGuard no_grad;  // a blend of inputs needs no autograd graph
  for (std::size_t i = 0; i < transforms.size(); ++i)
    batch = transforms[i]->apply(batch_transform_seed(at.run_seed, at.rank, at.epoch, at.batch, i), std::move(batch));
  return batch;
}

}  // namespace tp
