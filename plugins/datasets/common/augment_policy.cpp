// The magnitude tables and the per-sample draws of RandAugment / TrivialAugmentWide
// (torchvision/transforms/v2/_auto_augment.py, _AUGMENTATION_SPACE of each class).
#include "augment_policy.h"

#include <cmath>

#include "rng.h"

namespace tp::datasets {
namespace {

/// torch.linspace(start, end, 31)[bin] in float32: ATen fills the first half from the start and
/// the second half from the end, step = (end - start) / 30 in float32. 31 values are fewer than
/// its vectorised loop takes (2 x 16 lanes with AVX-512), so its scalar lambda computes all of
/// them, compiled to a fused multiply-add; plain multiply-then-add differs in the last bit for
/// a few bins (e.g. TrivialAugment's TranslateX bin 15 is 15.999999, which int() makes 15).
double linspace(double start, double end, int bin) {
  const auto s = static_cast<float>(start), e = static_cast<float>(end);
  const float step = (e - s) / static_cast<float>(kMagnitudeBins - 1);
  const float v = bin < kMagnitudeBins / 2 ? std::fma(step, static_cast<float>(bin), s)
                                           : std::fma(-step, static_cast<float>(kMagnitudeBins - 1 - bin), e);
  return static_cast<double>(v);
}

}  // namespace

bool aug_op_signed(AugOp op) {
  switch (op) {
    case AugOp::kShearX: case AugOp::kShearY: case AugOp::kTranslateX: case AugOp::kTranslateY:
    case AugOp::kRotate: case AugOp::kBrightness: case AugOp::kColor: case AugOp::kContrast:
    case AugOp::kSharpness: return true;
    default: return false;
  }
}

double aug_magnitude(bool wide, AugOp op, int bin, int h, int w) {
  switch (op) {
    case AugOp::kShearX:
    case AugOp::kShearY: return linspace(0.0, wide ? 0.99 : 0.3, bin);
    case AugOp::kTranslateX: return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * w, bin);
    case AugOp::kTranslateY: return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * h, bin);
    case AugOp::kRotate: return linspace(0.0, wide ? 135.0 : 30.0, bin);
    case AugOp::kBrightness:
    case AugOp::kColor:
    case AugOp::kContrast:
    case AugOp::kSharpness: return linspace(0.0, wide ? 0.99 : 0.9, bin);
    case AugOp::kPosterize: {
      // (8 - arange(31) / (30 / 4 or 30 / 6)).round(): never a .5 case, so nearbyint agrees.
      const float v = 8.f - static_cast<float>(bin) / static_cast<float>((kMagnitudeBins - 1) / (wide ? 6.0 : 4.0));
      return std::nearbyint(v);
    }
    case AugOp::kSolarize: return linspace(1.0, 0.0, bin);
    default: return 0.0;
  }
}

std::vector<AugStep> plan_augment(const AugmentOptions& o, int h, int w, uint64_t seed) {
  std::vector<AugStep> steps;
  if (o.kind == AugmentOptions::Kind::kNone) return steps;
  const bool wide = o.kind == AugmentOptions::Kind::kTrivialAugmentWide;
  const int count = wide ? 1 : o.num_ops;
  Rng op_rng(seed, kTagAugmentOp), sign_rng(seed, kTagAugmentSign);
  const int bin = wide ? Rng(seed, kTagAugmentBin).below(kMagnitudeBins) : o.magnitude;
  for (int i = 0; i < count; ++i) {
    AugStep s;
    s.op = static_cast<AugOp>(op_rng.below(kAugOpCount));
    s.magnitude = aug_magnitude(wide, s.op, bin, h, w);
    // One sign draw per op, used or not, so op i's sign never depends on the ops before it.
    const bool negate = sign_rng.uniform() <= 0.5;
    if (aug_op_signed(s.op) && negate) s.magnitude = -s.magnitude;
    steps.push_back(s);
  }
  return steps;
}

cv::Mat apply_augment(const cv::Mat& bgr, const std::vector<AugStep>& steps) {
  cv::Mat img = bgr;
  for (const AugStep& s : steps) img = apply_aug_op(img, s.op, s.magnitude);
  return img;
}

}  // namespace tp::datasets
