#include "class_maps.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "../../report/png_encode.h"
#include "tp/framework/engine/pixel_maps.h"
#include "tp/framework/error.h"

namespace tp::detail {

bool is_dense_output(const at::Tensor& output) {
  return (output.dim() == 4 && output.is_floating_point()) ||
         (output.dim() == 3 && !output.is_floating_point() && output.scalar_type() != at::kBool);
}

std::vector<std::string> encode_class_maps(const std::string& name, const at::Tensor& output, const NamedTensors& batch,
                                           const BatchLayout& layout, int64_t rows) {
  TP_CHECK(is_dense_output(output), "host predict --format png: output '", name, "' is ", output.scalar_type(),
           output.sizes(), ", not a dense prediction (floating [B, C, H, W] scores or integer [B, H, W] class ids); ",
           "name a dense output with --outputs, or choose csv, jsonl or npy");
  // Each sample's map at its image's size (pixel_maps.h); a dense output of no image's size as it is.
  std::vector<at::Tensor> maps = pixel_maps(output, batch, layout, rows);
  if (maps.empty())
    for (int64_t i = 0; i < rows; ++i) maps.push_back(output[i].to(at::kCPU));
  int64_t low = 0, high = 0;
  for (at::Tensor& map : maps) {
    map = (map.dim() == 3 ? map.argmax(0) : map).to(at::kLong);
    if (map.numel() == 0) continue;
    low = std::min(low, map.min().item<int64_t>());
    high = std::max(high, map.max().item<int64_t>());
  }
  TP_CHECK(low >= 0 && high <= 65535, "host predict --format png: output '", name, "' holds class ids from ", low,
           " to ", high, "; a PNG class map holds 0 to 65535");
  const bool sixteen_bit = output.dim() == 4 ? output.size(1) > 256 : high > 255;
  std::vector<std::string> encoded;
  encoded.reserve(maps.size());
  for (const at::Tensor& map : maps) {
    const at::Tensor pixels = map.to(sixteen_bit ? at::kUInt16 : at::kByte).contiguous();
    encoded.push_back(encode_png_gray(pixels.data_ptr(), static_cast<int>(pixels.size(1)),
                                      static_cast<int>(pixels.size(0)), sixteen_bit));
  }
  return encoded;
}

}  // namespace tp::detail
