// optim.lr_base: the learning rate from the global batch, as timm's train.py sets --lr from
// --lr-base when --lr is not given. The global batch needs the number of ranks, which the config
// file does not know: the command applies it once the ranks are known (host/session.cpp).
#pragma once

#include <optional>
#include <string>

#include "tp/framework/config/run_config.h"

namespace tp {

/// The global batch lr_base is scaled by: train.batch_size x world_size x train.grad_accum_steps
/// (timm's batch_size x world_size x grad_accum_steps).
int64_t global_batch(const TrainSection& train, int world_size);

/// Whether lr_base scales by the square root of the batch ratio: optim.lr_base_scale "sqrt", or
/// "auto" for the adaptive optimizers timm names (its rule: 'ada' or 'lamb' in the name: adam,
/// adamw, lamb); "linear", or "auto" for sgd, rmsprop and lion, scales by the ratio itself.
bool lr_base_scales_by_sqrt(const OptimSection& optim);

/// With optim.lr_base > 0, sets optim.lr = lr_base x (global_batch / lr_base_size), or x its
/// square root (lr_base_scales_by_sqrt), and returns the log line that says so; std::nullopt and
/// `optim` unchanged when lr_base is 0. Example: lr_base 5e-4, batch 128 on 8 ranks, adamw:
/// lr = 5e-4 x sqrt(1024 / 256) = 1e-3.
std::optional<std::string> apply_lr_base(OptimSection& optim, const TrainSection& train, int world_size);

}  // namespace tp
