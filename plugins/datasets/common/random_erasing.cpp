// RandomErasing: box sampling as torchvision.transforms.v2.RandomErasing.make_params, values
// zero or standard normal (torchvision draws them with Tensor.normal_; ours come from the sample
// seed, so the values differ from torchvision's but follow the same distribution).
#include "random_erasing.h"

#include <cmath>

#include "rng.h"

namespace tp::datasets {

EraseDraws erase_draws(uint64_t seed) {
  Rng rng(seed, kTagErase);
  EraseDraws d;
  d.u_apply = rng.uniform();
  for (auto& attempt : d.u)
    for (double& u : attempt) u = rng.uniform();
  return d;
}

EraseBox box_from_draws(const ErasingOptions& o, int height, int width, const EraseDraws& d) {
  EraseBox box;
  if (!(d.u_apply < o.p)) return box;
  const double area = static_cast<double>(height) * width;
  // torchvision keeps log(ratio) and both uniform draws in float32 tensors (torch.empty(1),
  // torch.log, torch.exp), so the fractions are rounded to float here too.
  const float log_lo = std::log(static_cast<float>(o.ratio[0])), log_hi = std::log(static_cast<float>(o.ratio[1]));
  for (const auto& u : d.u) {
    const auto frac = static_cast<float>(o.scale[0] + (o.scale[1] - o.scale[0]) * u[0]);
    const double erase_area = area * static_cast<double>(frac);
    const auto log_aspect = static_cast<float>(log_lo + (static_cast<double>(log_hi) - log_lo) * u[1]);
    const double aspect = static_cast<double>(std::exp(log_aspect));
    // Python's round() rounds half to even, as nearbyint does in the default rounding mode.
    const int h = static_cast<int>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    box.erase = true;
    box.h = h;
    box.w = w;
    box.i = static_cast<int>(u[2] * (height - h + 1));
    box.j = static_cast<int>(u[3] * (width - w + 1));
    return box;
  }
  return box;
}

void random_erase(float* pixels, int height, int width, bool channels_last, const ErasingOptions& o, uint64_t seed) {
  if (o.p <= 0.0) return;
  const EraseBox b = box_from_draws(o, height, width, erase_draws(seed));
  if (!b.erase) return;
  Rng rng(seed, kTagEraseValue);
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  bool have_spare = false;
  float spare = 0.f;
  for (int c = 0; c < 3; ++c) {
    for (int y = b.i; y < b.i + b.h; ++y) {
      for (int x = b.j; x < b.j + b.w; ++x) {
        float v = 0.f;
        if (o.random_value && have_spare) {
          v = spare;
          have_spare = false;
        } else if (o.random_value) {
          // Box-Muller in float, both outputs used: about 10 ns per value. 1 - u keeps the
          // logarithm's argument in (0, 1].
          const auto r = std::sqrt(-2.f * std::log(static_cast<float>(1.0 - rng.uniform())));
          const auto t = static_cast<float>(6.283185307179586 * rng.uniform());
          v = r * std::cos(t);
          spare = r * std::sin(t);
          have_spare = true;
        }
        const std::size_t at = static_cast<std::size_t>(y) * width + x;
        pixels[channels_last ? 3 * at + c : c * plane + at] = v;
      }
    }
  }
}

}  // namespace tp::datasets
