#include "tp/framework/engine/pixel_maps.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "tp/framework/error.h"

namespace tp {
namespace {

// The batch's floating [B, C, H, W] field the per-pixel `output` maps (its last two sizes are
// the output's), or nullptr; with its name.
const std::pair<std::string, at::Tensor>* image_field(const at::Tensor& output, const NamedTensors& batch) {
  const bool scores = output.dim() == 4 && output.is_floating_point();
  const bool ids = output.dim() == 3 && !output.is_floating_point() && output.scalar_type() != at::kBool;
  if (!scores && !ids) return nullptr;
  for (const auto& field : batch) {
    const at::Tensor& t = field.second;
    if (t.dim() == 4 && t.is_floating_point() && t.size(-2) == output.size(-2) && t.size(-1) == output.size(-1))
      return &field;
  }
  return nullptr;
}

const at::Tensor* field_named(const NamedTensors& batch, const std::string& name) {
  for (const auto& [n, t] : batch)
    if (n == name) return &t;
  return nullptr;
}

// `map` ([C, h, w] scores or [h, w] ids) resized to height x width.
at::Tensor resized(const at::Tensor& map, int64_t height, int64_t width) {
  if (map.size(-2) == height && map.size(-1) == width) return map;
  if (map.is_floating_point())
    return at::upsample_bilinear2d(map.unsqueeze(0), {height, width}, /*align_corners=*/false).squeeze(0);
  return at::upsample_nearest2d(map.unsqueeze(0).unsqueeze(0).to(at::kFloat), {height, width})
      .squeeze(0)
      .squeeze(0)
      .to(map.scalar_type());
}

}  // namespace

bool is_pixel_map(const at::Tensor& output, const NamedTensors& batch) { return image_field(output, batch) != nullptr; }

at::Tensor own_sizes(const NamedTensors& batch, const BatchLayout& layout, const std::string& name) {
  const FieldBatching* padding = layout.find(name);
  if (padding == nullptr || padding->batching != Batching::kPad) return {};
  const at::Tensor* lengths = field_named(batch, BatchLayout::lengths_name(name));
  if (lengths == nullptr) return {};
  return lengths->narrow(1, lengths->size(1) - 2, 2).to(at::kCPU, at::kLong).contiguous();
}

at::Tensor pixel_map_sizes(const at::Tensor& output, const NamedTensors& batch, const BatchLayout& layout) {
  const auto* image = image_field(output, batch);
  return image != nullptr ? own_sizes(batch, layout, image->first) : at::Tensor();
}

std::vector<at::Tensor> pixel_maps(const at::Tensor& output, const NamedTensors& batch, const BatchLayout& layout,
                                   int64_t rows) {
  std::vector<at::Tensor> maps;
  const auto* image = image_field(output, batch);
  if (image == nullptr) return maps;
  const at::Tensor own = own_sizes(batch, layout, image->first);
  const at::Tensor* original_field = field_named(batch, kOriginalSizeField);
  at::Tensor original;
  if (original_field != nullptr) {
    original = original_field->to(at::kCPU, at::kLong).contiguous();
    TP_CHECK(original.dim() == 2 && original.size(0) >= rows && original.size(1) == 2, "the batch's '",
             kOriginalSizeField, "' is ", original.sizes(), "; it must be [B, 2]: each image's (height, width) before "
             "its transform resized it");
    TP_CHECK(original.numel() == 0 || original.min().item<int64_t>() >= 1, "the batch's '", kOriginalSizeField,
             "' holds a size below 1");
  }
  // Half-precision scores are written as float32 anyway; bilinear resizing wants float.
  const at::Tensor source = output.is_floating_point() && output.scalar_type() != at::kDouble ? output.to(at::kFloat) : output;
  const int64_t height = output.size(-2), width = output.size(-1);
  maps.reserve(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    at::Tensor map = source[i];
    if (own.defined()) {
      const int64_t h = std::clamp<int64_t>(own[i][0].item<int64_t>(), 1, height);
      const int64_t w = std::clamp<int64_t>(own[i][1].item<int64_t>(), 1, width);
      map = map.narrow(-2, 0, h).narrow(-1, 0, w);
    }
    if (original.defined()) map = resized(map, original[i][0].item<int64_t>(), original[i][1].item<int64_t>());
    maps.push_back(map.to(at::kCPU).contiguous());
  }
  return maps;
}

}  // namespace tp
