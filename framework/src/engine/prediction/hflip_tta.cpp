#include "engine/prediction/hflip_tta.h"

#include <ATen/ops/flip.h>

#include "tp/framework/error.h"

namespace tp {

at::Tensor hflip_tta_mean(const at::Tensor& plain, const at::Tensor& mirrored) {
  if (!plain.is_floating_point()) return plain;
  TP_CHECK(plain.sizes() == mirrored.sizes(), "host predict --tta hflip: an output is ", plain.sizes(),
           " for the images and ", mirrored.sizes(), " for the mirrored images; TTA needs both alike.");
  // [B, C, H, W]: a score per pixel, so the mirrored pass's map is mirrored too.
  const at::Tensor aligned = plain.dim() == 4 ? at::flip(mirrored, {-1}) : mirrored;
  return (plain + aligned) / 2;
}

}  // namespace tp
