// Export of model weights in the safetensors format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} plus
// "__metadata__", then the raw little-endian tensor bytes. Python reads the file with
// `safetensors.torch.load_file(path)` into the model's state_dict (names unchanged).
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tp {

/// Writes `tensors` (CPU or not; copied to CPU, contiguous) to `path` atomically. `metadata` goes
/// into "__metadata__" (string values only, as the format requires). Throws tp::Error for dtypes
/// the format has no code for and for I/O failures.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace tp
