// RandAugment and TrivialAugmentWide as policies: which ops a sample gets and at what magnitude,
// drawn from the sample seed, with torchvision's magnitude tables (num_magnitude_bins = 31).
// The ops themselves are in augment_ops.h.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "augment_ops.h"

namespace tp::datasets {

inline constexpr int kMagnitudeBins = 31;

/// Which automatic augmentation the train split runs (config keys rand_augment, trivial_augment).
struct AugmentOptions {
  enum class Kind { kNone, kRandAugment, kTrivialAugmentWide };
  Kind kind = Kind::kNone;
  int num_ops = 2;    ///< RandAugment N, in [0, 14]
  int magnitude = 9;  ///< RandAugment M, a bin in [0, 30]
};

/// One op with its signed magnitude, as apply_aug_op takes it.
struct AugStep {
  AugOp op = AugOp::kIdentity;
  double magnitude = 0.0;
};

/// Whether torchvision negates `op`'s magnitude with probability 1/2 (its `signed` flag).
bool aug_op_signed(AugOp op);

/// The unsigned magnitude of `op` at `bin` in [0, 30] for an h x w image: RandAugment's table
/// when !wide, TrivialAugmentWide's when wide, each value as torchvision's float32 table holds
/// it (torch.linspace in float32; Posterize's bits rounded half-to-even). 0 for ops without one.
double aug_magnitude(bool wide, AugOp op, int bin, int h, int w);

/// The ops of one sample: RandAugment draws num_ops ops uniformly with replacement, each at bin
/// `magnitude`; TrivialAugmentWide draws one op and a uniform bin. A signed op is negated when
/// its draw u <= 0.5 (torchvision's `torch.rand(()) <= 0.5`). Empty for Kind::kNone. Draws use
/// tags kTagAugmentOp, kTagAugmentSign, kTagAugmentBin of `seed` only; h, w size the translate
/// magnitudes.
std::vector<AugStep> plan_augment(const AugmentOptions& o, int h, int w, uint64_t seed);

/// `steps` applied in order to `bgr` (CV_8UC3); returns the result (a new image unless empty).
cv::Mat apply_augment(const cv::Mat& bgr, const std::vector<AugStep>& steps);

}  // namespace tp::datasets
