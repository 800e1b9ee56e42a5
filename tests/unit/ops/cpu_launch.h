// Running a fused kernel's launch on the CPU for the tests of tests/unit/ops: every thread of the
// launch, in turn, through the kernel's own thread function; and the bit-level helpers those tests
// compare with. Shared by norm_act_passes_test.cpp and pool_passes_test.cpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/norm_act_passes.h"  // ApplyPlan

namespace tp::ops_test {

/// The elementwise and pool kernels' threads per block (norm_act_kernels.cu's kApplyThreads,
/// pool_kernels.cu's kPoolThreads): a launch for `plan` has whole blocks of them, the last threads
/// past plan.threads doing nothing.
inline constexpr int kThreadsPerBlock = 256;

/// Every thread of the launch the kernels make for `plan`, in turn: body(t) for each index t.
template <typename Body>
void run_launch(const tp::ops::ApplyPlan& plan, Body body) {
  const int64_t blocks = (plan.threads + kThreadsPerBlock - 1) / kThreadsPerBlock;
  for (int64_t t = 0; t < blocks * kThreadsPerBlock; ++t) body(t);
}

/// Whether a and b have the same bits (NaN equal to the same NaN, -0.0 unequal to 0.0).
template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// A value no pass writes: all bits set (a NaN in every type), to find elements left unwritten.
template <typename T>
T sentinel() {
  T v;
  std::memset(&v, 0xFF, sizeof(T));
  return v;
}

}  // namespace tp::ops_test
