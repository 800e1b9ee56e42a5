// bench/plugin_boundary: what the DLPack check of a dataset field costs (tp::detail::dlpack_problem,
// run on every field of every sample by DatasetProxy::get; issue 41 item 7) against what the host
// does with the same field anyway, adopting it as an at::Tensor (at::fromDLPack). Both sides run
// in alternating rounds on the same [3, 224, 224] float32 field; the figures are medians over the
// rounds, per call. Optional: not part of `all` or of ctest.
//   cmake --build build --target dlpack_check_bench && build/bin/dlpack_check_bench
#include <ATen/DLConvertor.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "plugin/dlpack_check.h"

namespace {

constexpr int kRounds = 9;
constexpr int kCalls = 200000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  std::vector<float> pixels(3 * 224 * 224, 0.5f);
  int64_t shape[] = {3, 224, 224};
  int64_t strides[] = {224 * 224, 224, 1};
  DLManagedTensor field{};
  field.dl_tensor.data = pixels.data();
  field.dl_tensor.device = {kDLCPU, 0};
  field.dl_tensor.ndim = 3;
  field.dl_tensor.dtype = {kDLFloat, 32, 1};
  field.dl_tensor.shape = shape;
  field.dl_tensor.strides = strides;
  field.deleter = [](DLManagedTensor*) {};  // the pixels stay ours

  using Clock = std::chrono::steady_clock;
  std::vector<double> check_ns, adopt_ns;
  std::size_t problems = 0;
  int64_t elements = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) problems += tp::detail::dlpack_problem(field.dl_tensor).size();
    auto t1 = Clock::now();
    for (int i = 0; i < kCalls; ++i) elements += at::fromDLPack(&field).numel();
    auto t2 = Clock::now();
    check_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kCalls);
    adopt_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / kCalls);
  }
  if (problems != 0 || elements != int64_t{kRounds} * kCalls * 3 * 224 * 224) {
    std::fprintf(stderr, "dlpack_check_bench: unexpected result (problems %zu)\n", problems);
    return 1;
  }
  const double check = median(check_ns), adopt = median(adopt_ns);
  std::printf("dlpack_problem on a [3, 224, 224] float32 field: %.1f ns per call (median of %d rounds of %d)\n",
              check, kRounds, kCalls);
  std::printf("at::fromDLPack of the same field (the baseline: the host adopts every field): %.1f ns per call\n", adopt);
  std::printf("check / adoption: %.3f\n", check / adopt);
  return 0;
}
