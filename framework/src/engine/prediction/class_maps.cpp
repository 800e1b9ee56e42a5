#include "class_maps.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "../../report/png_encode.h"
#include "tp/framework/error.h"

namespace tp::detail {
namespace {

// The [rows, 2] (height, width) each sample's map is cropped to, or an undefined tensor when no
// pad field of the batch was padded to the output's size.
at::Tensor own_sizes(const NamedTensors& batch, const BatchLayout& layout, int64_t height, int64_t width) {
  for (const FieldBatching& f : layout.fields()) {
    if (f.batching != Batching::kPad) continue;
    const at::Tensor* field = nullptr;
    const at::Tensor* lengths = nullptr;
    for (const auto& [name, tensor] : batch) {
      if (name == f.name) field = &tensor;
      if (name == BatchLayout::lengths_name(f.name)) lengths = &tensor;
    }
    if (field == nullptr || lengths == nullptr || field->dim() < 3) continue;
    if (field->size(-2) != height || field->size(-1) != width) continue;
    return lengths->narrow(1, lengths->size(1) - 2, 2).to(at::kCPU).contiguous();
  }
  return {};
}

}  // namespace

bool is_dense_output(const at::Tensor& output) {
  return (output.dim() == 4 && output.is_floating_point()) ||
         (output.dim() == 3 && !output.is_floating_point() && output.scalar_type() != at::kBool);
}

std::vector<std::string> encode_class_maps(const std::string& name, const at::Tensor& output, const NamedTensors& batch,
                                           const BatchLayout& layout, int64_t rows) {
  TP_CHECK(is_dense_output(output), "host predict --format png: output '", name, "' is ", output.scalar_type(),
           output.sizes(), ", not a dense prediction (floating [B, C, H, W] scores or integer [B, H, W] class ids); ",
           "name a dense output with --outputs, or choose csv, jsonl or npy");
  const at::Tensor ids = (output.dim() == 4 ? output.argmax(1) : output).narrow(0, 0, rows).to(at::kCPU, at::kLong);
  if (ids.numel() > 0) {
    const int64_t low = ids.min().item<int64_t>();
    const int64_t high = ids.max().item<int64_t>();
    TP_CHECK(low >= 0 && high <= 65535, "host predict --format png: output '", name, "' holds class ids from ", low,
             " to ", high, "; a PNG class map holds 0 to 65535");
  }
  const bool sixteen_bit = output.dim() == 4 ? output.size(1) > 256 : (ids.numel() > 0 && ids.max().item<int64_t>() > 255);
  const int64_t height = ids.size(1);
  const int64_t width = ids.size(2);
  const at::Tensor sizes = own_sizes(batch, layout, height, width);
  std::vector<std::string> maps;
  maps.reserve(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    at::Tensor map = ids[i];
    if (sizes.defined()) {
      const int64_t h = std::clamp<int64_t>(sizes[i][0].item<int64_t>(), 1, height);
      const int64_t w = std::clamp<int64_t>(sizes[i][1].item<int64_t>(), 1, width);
      map = map.narrow(0, 0, h).narrow(1, 0, w);
    }
    const at::Tensor pixels = map.to(sixteen_bit ? at::kUInt16 : at::kByte).contiguous();
    maps.push_back(encode_png_gray(pixels.data_ptr(), static_cast<int>(pixels.size(1)),
                                   static_cast<int>(pixels.size(0)), sixteen_bit));
  }
  return maps;
}

}  // namespace tp::detail
