// RandomErasing on the normalised float output, as torchvision.transforms.v2.RandomErasing placed
// after Normalize: with probability p, one rectangle of the image is overwritten with zeros or
// with per-pixel standard normal values. Draws come from the sample seed (tags kTagErase,
// kTagEraseValue), so any worker erases the same box with the same values.
#pragma once

#include <array>
#include <cstdint>

namespace tp::datasets {

/// Config keys random_erasing, erasing_scale, erasing_ratio, erasing_value.
struct ErasingOptions {
  double p = 0.0;                           ///< probability of erasing; 0 disables it
  std::array<double, 2> scale{0.02, 0.33};  ///< erased area as a fraction of the image
  std::array<double, 2> ratio{0.3, 3.3};    ///< aspect h / w of the box, drawn log-uniformly
  bool random_value = false;                ///< "random": N(0, 1) per value; "zero": 0
};

/// One erased box (top-left i, j; size h x w). `erase` false: nothing is erased.
struct EraseBox {
  bool erase = false;
  int i = 0, j = 0, h = 0, w = 0;
};

/// The raw uniforms a box is made from: per attempt (at most 10) u_area, u_log_ratio, and when
/// the box fits u_i, u_j. box_from_draws turns them into a box the way torchvision's
/// RandomErasing.make_params does; exposed so the oracle test can feed both the same draws.
struct EraseDraws {
  double u_apply = 1.0;  ///< erase when u_apply < p (torchvision: skip when rand >= p)
  double u[10][4] = {};
};

/// EraseDraws from the sample seed (tag kTagErase): u_apply first, then 4 draws per attempt.
EraseDraws erase_draws(uint64_t seed);

/// torchvision's make_params given `d`: area = H*W * uniform(scale), aspect = exp(uniform(log
/// ratio)), h = round(sqrt(area * aspect)), w = round(sqrt(area / aspect)) (round half to even);
/// the box must satisfy h < H and w < W, else the next attempt; then i = floor(u_i * (H - h +
/// 1)), j = floor(u_j * (W - w + 1)). No box fits in 10 attempts: nothing is erased.
EraseBox box_from_draws(const ErasingOptions& o, int height, int width, const EraseDraws& d);

/// Erases the box of `seed` in `pixels` (3 x height x width floats, CHW, or HWC when
/// channels_last). Random values are drawn in CHW order of the box whatever the layout, so
/// channels_last changes only where they are stored. Cost: nothing unless erased; then one
/// write per erased value (plus a Box-Muller normal for "random").
void random_erase(float* pixels, int height, int width, bool channels_last, const ErasingOptions& o, uint64_t seed);

}  // namespace tp::datasets
