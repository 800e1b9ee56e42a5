// The finalize arithmetic of the fused BatchNorm kernels (norm_act_kernels.cu): how a channel's
// row-block partials are shared among the finalize's lanes and combined. Host and device code
// alike: the kernels run it, and a CPU test (tests/unit/ops/norm_act_math_test.cpp) holds the
// lanes-then-tree combination against a two-pass mean and variance, so the statistics are checked
// without a GPU.
#pragma once

#include <stdint.h>

#include "util/host_device.h"

namespace tp::ops {

/// blockDim.y of the finalizes: a channel's up to ~500 partials combined by 16 lanes, not one
/// thread walking them all (a serial walk was latency-bound: 4.8 ms of ResNet-50's step on an H200).
inline constexpr int kFinalizeLanes = 16;

/// A combination of row blocks of one channel: count, mean and M2 (sum of squared deviations).
struct Moments {
  double n, mean, m2;
};

/// `a` and a block of nb rows with mean `mean_b` and M2 `m2_b` combined (Chan et al.'s pairwise
/// update); either may be empty.
TP_HOST_DEVICE inline Moments combine(const Moments& a, double nb, double mean_b, double m2_b) {
  const double total = a.n + nb;
  if (nb == 0.0) return a;
  const double delta = mean_b - a.mean;
  return {total, a.mean + delta * (nb / total), a.m2 + m2_b + delta * delta * (a.n * nb / total)};
}

/// The row blocks [begin, end) whose partials lane `lane` combines: a contiguous share, in order;
/// together the lanes cover [0, row_blocks) once.
struct BlockShare {
  int64_t begin, end;
};
TP_HOST_DEVICE inline BlockShare lane_share(int32_t row_blocks, int lane) {
  const int64_t per = (row_blocks + kFinalizeLanes - 1) / kFinalizeLanes;
  const int64_t begin = lane * per < row_blocks ? lane * per : row_blocks;
  return {begin, begin + per < row_blocks ? begin + per : row_blocks};
}

/// The rows of row block `b`: [b * rows_per_block, ...) clipped at `rows`.
TP_HOST_DEVICE inline int64_t block_row_count(int64_t b, int64_t rows_per_block, int64_t rows) {
  const int64_t begin = b * rows_per_block;
  return (begin + rows_per_block < rows ? begin + rows_per_block : rows) - begin;
}

}  // namespace tp::ops
