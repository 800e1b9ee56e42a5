// mix: what Mixup and CutMix draw for one batch (lambda, CutMix's box, the choice between them),
// as a pure function of the host's per-call seed. Header-only and LibTorch-free, so the
// torchvision oracle (tests/plugins/batch_transforms) draws the same parameters the plugin uses.
//
// The generator is std::mt19937_64, whose output the C++ standard fixes, with our own uniform,
// normal (Box-Muller), gamma (Marsaglia-Tsang) and Beta on top: the standard library's
// distributions are implementation-defined, these give the same numbers with every compiler.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace tp::mix {

/// A seeded stream of the draws the transforms need.
class MixRandom {
 public:
  explicit MixRandom(uint64_t seed) : gen_(seed) {}
  /// Uniform in [0, 1): the top 53 bits of one 64-bit draw.
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n), n > 0 (floor of uniform() * n; the bias is below 2^-53 * n).
  int64_t below(int64_t n) { return std::min<int64_t>(static_cast<int64_t>(uniform() * static_cast<double>(n)), n - 1); }
  /// Standard normal (Box-Muller, one of the pair).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }
  /// Gamma(shape, 1), shape > 0 (Marsaglia & Tsang 2000; shape < 1 by the boost U^(1/shape)).
  double gamma(double shape) {
    if (shape < 1.0) return gamma(shape + 1.0) * std::pow(1.0 - uniform(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = normal();
      double v = 1.0 + c * x;
      if (v <= 0.0) continue;
      v = v * v * v;
      const double u = 1.0 - uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
  /// Beta(a, a), a > 0: X / (X + Y) with X, Y ~ Gamma(a); clamped into [0, 1].
  double beta(double a) {
    const double x = gamma(a);
    const double y = gamma(a);
    const double sum = x + y;
    return sum > 0.0 ? std::clamp(x / sum, 0.0, 1.0) : 0.5;
  }

 private:
  std::mt19937_64 gen_;
};

/// The options of the three components, reduced to one policy (timm's Mixup): with probability
/// `prob` the batch is mixed; then, when both alphas are positive, CutMix with probability
/// `switch_prob`, else Mixup; an alpha of 0 disables its method.
struct MixPolicy {
  double mixup_alpha = 0.0;
  double cutmix_alpha = 0.0;
  double switch_prob = 0.5;
  double prob = 1.0;
};

/// What one batch gets. Not applied: images unchanged, labels one-hot (lam = 1).
/// CutMix: the box [x1, x2) x [y1, y2) of each image is taken from its partner, and `lam` is the
/// part of the image left unchanged (torchvision's lam_adjusted).
struct MixParams {
  bool applied = false;
  bool cutmix = false;
  double lam = 1.0;
  int64_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

/// The parameters for a batch of `height` x `width` images under `policy`, from `seed` alone.
/// Draw order: apply? (uniform, only when prob < 1), CutMix? (uniform, only when both alphas are
/// positive), lambda (Beta), then for CutMix the box centre x, y. The box follows torchvision v2
/// CutMix.make_params: centre uniform over the pixels, half-sides int(0.5 sqrt(1 - lam) W) and
/// int(0.5 sqrt(1 - lam) H), clamped to the image, lam recomputed from the clamped area.
inline MixParams draw_mix_params(uint64_t seed, const MixPolicy& policy, int64_t height, int64_t width) {
  MixRandom random(seed);
  MixParams p;
  if (policy.prob < 1.0 && !(random.uniform() < policy.prob)) return p;
  p.applied = true;
  if (policy.mixup_alpha > 0.0 && policy.cutmix_alpha > 0.0) p.cutmix = random.uniform() < policy.switch_prob;
  else p.cutmix = policy.cutmix_alpha > 0.0;
  const double lam = random.beta(p.cutmix ? policy.cutmix_alpha : policy.mixup_alpha);
  if (!p.cutmix) {
    p.lam = lam;
    return p;
  }
  const int64_t cx = random.below(width);
  const int64_t cy = random.below(height);
  const double r = 0.5 * std::sqrt(1.0 - lam);
  const auto half_w = static_cast<int64_t>(r * static_cast<double>(width));
  const auto half_h = static_cast<int64_t>(r * static_cast<double>(height));
  p.x1 = std::max<int64_t>(cx - half_w, 0);
  p.y1 = std::max<int64_t>(cy - half_h, 0);
  p.x2 = std::min<int64_t>(cx + half_w, width);
  p.y2 = std::min<int64_t>(cy + half_h, height);
  p.lam = 1.0 - static_cast<double>((p.x2 - p.x1) * (p.y2 - p.y1)) / static_cast<double>(width * height);
  return p;
}

}  // namespace tp::mix
