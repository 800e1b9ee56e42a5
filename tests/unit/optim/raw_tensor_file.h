// The exchange files between the Python oracles and their standalone C++ drivers (timm_optimizer
// and agc): a tensor's float32 values, raw, in row-major order. Without doctest, unlike
// optimizer_test_util.h's pair: a driver reports a short file by throwing.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace tp::test {

/// The float32 tensor of `shape` in `file`; throws std::runtime_error when the file is missing or short.
inline at::Tensor read_raw(const std::filesystem::path& file, const std::vector<int64_t>& shape) {
  at::Tensor t = at::empty(shape, at::kFloat);
  std::ifstream in(file, std::ios::binary);
  const auto bytes = static_cast<std::streamsize>(t.numel() * static_cast<int64_t>(sizeof(float)));
  in.read(static_cast<char*>(t.data_ptr()), bytes);
  if (in.gcount() != bytes) throw std::runtime_error("short or missing file " + file.string());
  return t;
}

/// Writes float32 tensor `t`'s values to `file`.
inline void write_raw(const std::filesystem::path& file, const at::Tensor& t) {
  const at::Tensor c = t.detach().contiguous();
  std::ofstream(file, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
}

}  // namespace tp::test
