// Model weights in the safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} plus
// "__metadata__", then the raw little-endian tensor bytes. `host export` writes it (Python reads
// the file with `safetensors.torch.load_file(path)` into the model's state_dict, names
// unchanged); train.init_weights reads it.
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

/// The tensors of a safetensors file held in `bytes`, in header order, as CPU tensors (copies).
/// "__metadata__" and unknown header fields are skipped. Throws tp::Error naming what does not
/// fit: a header longer than the file, malformed JSON, an unsupported dtype, data_offsets outside
/// the data or not matching the shape.
std::vector<std::pair<std::string, at::Tensor>> read_safetensors(const std::vector<char>& bytes);

}  // namespace tp
