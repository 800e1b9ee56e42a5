// A tensor's dtype in the words its readers use: PyTorch's name without "torch." ("float32",
// "bfloat16"), which is also NumPy's and safetensors' spelling for the common types.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

namespace tp {

/// "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
/// "complex64", "complex128"; any other type as c10 names it.
std::string dtype_name(c10::ScalarType dtype);

}  // namespace tp
