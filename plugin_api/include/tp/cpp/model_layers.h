// torchhost C++ helpers for Tier T model authors: pieces that torchvision and timm models use and
// LibTorch's C++ API lacks, written to draw from LibTorch's default generators exactly as the
// Python originals do, so a plugin seeded like a Python model initialises and drops alike
// (tests/plugins/zoo_* check this against torchvision bit for bit).
//
//   tp::cpp::trunc_normal_(linear->weight, 0.02);          // torch.nn.init.trunc_normal_
//   h = tp::cpp::stochastic_depth(branch, p, is_training()) + x;  // StochasticDepth("row") / DropPath
#ifndef TP_CPP_MODEL_LAYERS_H
#define TP_CPP_MODEL_LAYERS_H

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/where.h>

#include <cstdint>
#include <vector>

namespace tp::cpp {

/// torch.nn.init.trunc_normal_(t, mean=0, std, a=-2, b=2) as torch 2.13/2.14 implement it when
/// the cut keeps more than 30% of the mass (std <= 1, e.g. 0.02 or sqrt(1 / fan_in)): normal
/// draws, those outside [-2, 2] drawn again until none is. In place, under the caller's no-grad.
inline void trunc_normal_(at::Tensor t, double std) {
  constexpr double kBound = 2.0;
  t.normal_(0.0, std);
  for (;;) {
    const at::Tensor outside = (t < -kBound).logical_or_(t > kBound);
    if (!outside.any().item<bool>()) return;
    t.copy_(at::where(outside, at::empty_like(t).normal_(0.0, std), t));
  }
}

/// torchvision.ops.stochastic_depth(x, p, mode="row", training), which is timm's
/// drop_path(x, p, training) with scale_by_keep: in training each sample (row of dimension 0)
/// is zeroed with probability `p` and the survivors scaled by 1 / (1 - p); otherwise, or with
/// p = 0, `x` itself (no copy). One bernoulli_ on an [N, 1, ...] tensor, as both draw it.
inline at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  const double survival = 1.0 - p;
  std::vector<int64_t> size(static_cast<size_t>(x.dim()), 1);
  size[0] = x.size(0);
  at::Tensor noise = at::empty(size, x.options()).bernoulli_(survival);
  if (survival > 0.0) noise.div_(survival);
  return x * noise;
}

}  // namespace tp::cpp

#endif  // TP_CPP_MODEL_LAYERS_H
