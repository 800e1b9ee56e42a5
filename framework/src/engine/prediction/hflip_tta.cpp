#include "engine/prediction/hflip_tta.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "tp/framework/engine/pixel_maps.h"
#include "tp/framework/error.h"

namespace tp {

at::Tensor mirror_rows(const at::Tensor& t, const at::Tensor& widths) {
  if (!widths.defined()) return at::flip(t, {-1});
  const int64_t full = t.size(-1);
  at::Tensor out = t.clone();
  for (int64_t b = 0; b < t.size(0); ++b) {
    const int64_t w = std::clamp<int64_t>(widths[b].item<int64_t>(), 0, full);
    if (w < 2) continue;
    out[b].narrow(-1, 0, w).copy_(at::flip(t[b].narrow(-1, 0, w), {-1}));
  }
  return out;
}

NamedTensors mirrored_batch(const NamedTensors& batch, const BatchLayout& layout) {
  NamedTensors out = batch;
  for (auto& [name, tensor] : out) {
    if (!tensor.is_floating_point() || tensor.dim() < 3) continue;
    const at::Tensor sizes = own_sizes(batch, layout, name);
    tensor = mirror_rows(tensor, sizes.defined() ? sizes.select(1, 1) : sizes);
  }
  return out;
}

at::Tensor hflip_tta_mean(const at::Tensor& plain, const at::Tensor& mirrored, const at::Tensor& widths) {
  if (!plain.is_floating_point()) return plain;
  TP_CHECK(plain.sizes() == mirrored.sizes(), "host predict --tta hflip: an output is ", plain.sizes(),
           " for the images and ", mirrored.sizes(), " for the mirrored images; TTA needs both alike.");
  // [B, C, H, W]: a score per pixel, so the mirrored pass's map is mirrored too.
  const at::Tensor aligned = plain.dim() == 4 ? mirror_rows(mirrored, widths) : mirrored;
  return (plain + aligned) / 2;
}

}  // namespace tp
