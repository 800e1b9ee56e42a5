#include "tp/framework/amp/precision.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <ATen/cuda/CUDAContext.h>  // device properties; needs the CUDA toolkit headers
#endif

#include <string>

#include "tp/framework/error.h"

namespace tp {
namespace {

constexpr const char* kPrecisionKey = "amp.precision";

std::string device_text(c10::Device device) { return device.str(); }

// Compute capability major of a CUDA device, or -1 when this LibTorch build cannot tell (a CPU
// build never reaches here: hasCUDA() is false there).
int cuda_capability_major(c10::DeviceIndex index) {
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  return at::cuda::getDeviceProperties(index)->major;
#else
  (void)index;
  return -1;
#endif
}

void check_cuda(Precision precision, c10::Device device) {
  if (!at::globalContext().hasCUDA()) {
    throw ConfigError(kPrecisionKey, std::string(kPrecisionKey) + " = \"" + std::string(to_string(precision)) + "\" on " +
                                device_text(device) +
                                ": CUDA is not available (a CPU build of LibTorch, or no driver/GPU). "
                                "Run on device \"cpu\" or install a CUDA build of LibTorch.");
  }
  const int gpus = at::detail::getCUDAHooks().getNumGPUs();
  const c10::DeviceIndex index = device.has_index() ? device.index() : at::detail::getCUDAHooks().current_device();
  if (index < 0 || index >= gpus) {
    throw ConfigError(kPrecisionKey, std::string(kPrecisionKey) + ": device " + device_text(device) + " does not exist; this machine has " +
                                std::to_string(gpus) + " CUDA device(s).");
  }
  // ROCm reports gfx architectures, not compute capabilities; every ROCm GPU LibTorch supports
  // runs bf16, so the check below is CUDA-only.
  if (precision == Precision::Bf16 && !at::detail::getCUDAHooks().hasROCM()) {
    const int major = cuda_capability_major(index);
    if (major >= 0 && major < 8) {
      throw ConfigError(kPrecisionKey, std::string(kPrecisionKey) + " = \"bf16\" on " + device_text(device) +
                                  ": this GPU has compute capability " + std::to_string(major) +
                                  ".x and no native bfloat16 (needs 8.0+, Ampere or newer); emulated "
                                  "bf16 is slower than fp32. Use amp.precision = \"fp16\" (with the grad "
                                  "scaler) or \"fp32\".");
    }
  }
}

}  // namespace

c10::ScalarType autocast_dtype(Precision precision) noexcept {
  switch (precision) {
    case Precision::Fp16: return c10::ScalarType::Half;
    case Precision::Bf16: return c10::ScalarType::BFloat16;
    case Precision::Fp32: break;
  }
  return c10::ScalarType::Float;
}

bool needs_grad_scaler(Precision precision) noexcept { return precision == Precision::Fp16; }

void check_precision_supported(Precision precision, c10::Device device) {
  if (precision == Precision::Fp32) return;
  switch (device.type()) {
    case c10::DeviceType::CPU:
      return;  // AutocastCPU has fp16 and bf16 policies since LibTorch 2.3 (tested in amp_tests)
    case c10::DeviceType::CUDA:
      check_cuda(precision, device);
      return;
    default:
      throw ConfigError(kPrecisionKey, std::string(kPrecisionKey) + " = \"" + std::string(to_string(precision)) + "\" on " +
                                  device_text(device) +
                                  ": torchhost runs mixed precision on cpu and cuda devices only. Use "
                                  "amp.precision = \"fp32\" on this device.");
  }
}

}  // namespace tp
