// Fuzz target: the safetensors reader behind train.init_weights (a .safetensors file) and `host
// export`'s round trip. Every input must give tensors or throw tp::Error; any other exception, a
// crash or a sanitizer report is a finding. The harness reads every byte of every tensor it gets,
// in instrumented code, so a tensor reaching past its buffer is an ASan report here, not a
// silent read inside (uninstrumented) LibTorch.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tp/framework/checkpoint/safetensors.h"
#include "tp/framework/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<char> bytes(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);
  try {
    unsigned sum = 0;
    for (const auto& [name, tensor] : tp::read_safetensors(bytes)) {
      if (!tensor.is_contiguous() || tensor.numel() == 0) continue;
      const auto* p = static_cast<const unsigned char*>(tensor.data_ptr());
      for (size_t i = 0; i < tensor.nbytes(); ++i) sum += p[i];
      sum += static_cast<unsigned>(name.size());
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const tp::Error&) {
    // The one expected way to reject a file.
  }
  return 0;
}
