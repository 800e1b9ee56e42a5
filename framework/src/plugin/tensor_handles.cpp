#include "tensor_handles.h"

#include "tp/framework/error.h"

namespace tp::detail {

int32_t to_tp_device(const c10::Device& device) {
  if (device.is_cpu()) return TP_DEVICE_CPU;
  if (device.is_cuda()) return TP_DEVICE_CUDA;
  throw Error("device " + device.str() + " is not supported by the plugin ABI (cpu and cuda are).");
}

int32_t to_tp_dtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return TP_DTYPE_FLOAT32;
    case c10::kHalf: return TP_DTYPE_FLOAT16;
    case c10::kBFloat16: return TP_DTYPE_BFLOAT16;
    case c10::kDouble: return TP_DTYPE_FLOAT64;
    case c10::kLong: return TP_DTYPE_INT64;
    case c10::kInt: return TP_DTYPE_INT32;
    case c10::kByte: return TP_DTYPE_UINT8;
    case c10::kBool: return TP_DTYPE_BOOL;
    default: throw Error(std::string("dtype ") + c10::toString(dtype) + " has no plugin ABI code.");
  }
}

c10::ScalarType from_tp_dtype(int32_t dtype) {
  switch (dtype) {
    case TP_DTYPE_FLOAT32: return c10::kFloat;
    case TP_DTYPE_FLOAT16: return c10::kHalf;
    case TP_DTYPE_BFLOAT16: return c10::kBFloat16;
    case TP_DTYPE_FLOAT64: return c10::kDouble;
    case TP_DTYPE_INT64: return c10::kLong;
    case TP_DTYPE_INT32: return c10::kInt;
    case TP_DTYPE_UINT8: return c10::kByte;
    case TP_DTYPE_BOOL: return c10::kBool;
    default: throw Error("unknown plugin dtype code " + std::to_string(dtype) + ".");
  }
}

}  // namespace tp::detail
