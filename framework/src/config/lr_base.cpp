#include "tp/framework/config/lr_base.h"

#include <cmath>
#include <cstdio>

namespace tp {

int64_t global_batch(const TrainSection& train, int world_size) {
  return train.batch_size * static_cast<int64_t>(world_size) * train.grad_accum_steps;
}

bool lr_base_scales_by_sqrt(const OptimSection& optim) {
  if (optim.lr_base_scale == "sqrt") return true;
  if (optim.lr_base_scale == "linear") return false;
  return optim.name.find("ada") != std::string::npos || optim.name.find("lamb") != std::string::npos;
}

std::optional<std::string> apply_lr_base(OptimSection& optim, const TrainSection& train, int world_size) {
  if (optim.lr_base <= 0) return std::nullopt;
  const int64_t batch = global_batch(train, world_size);
  const double ratio = static_cast<double>(batch) / static_cast<double>(optim.lr_base_size);
  const bool sqrt = lr_base_scales_by_sqrt(optim);
  optim.lr = optim.lr_base * (sqrt ? std::sqrt(ratio) : ratio);
  char line[320];
  std::snprintf(line, sizeof line,
                "optim.lr = %.6g: optim.lr_base %.6g x %s(global batch %lld / lr_base_size %lld) (%s, timm's --lr-base; "
                "the global batch is train.batch_size %lld x %d rank(s) x grad_accum_steps %lld)",
                optim.lr, optim.lr_base, sqrt ? "sqrt" : "", static_cast<long long>(batch),
                static_cast<long long>(optim.lr_base_size), sqrt ? "sqrt" : "linear",
                static_cast<long long>(train.batch_size), world_size, static_cast<long long>(train.grad_accum_steps));
  return std::string(line);
}

}  // namespace tp
