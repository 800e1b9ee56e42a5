// The per-sample random stream of image_folder: every random decision of a sample draws from its
// own Rng(seed, tag), so a sample's pixels are a pure function of (file, config, seed) (PLG-8)
// and adding a decision with a new tag never shifts the draws of the existing ones.
#pragma once

#include <cstdint>

#include "tp/cpp/random.h"

namespace tp::datasets {

/// A small deterministic generator (tp::cpp::SplitMix64 seeded from the sample seed and the
/// decision's tag), a few ns per draw. Not thread-shared: each decision constructs its own from
/// the sample seed.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t tag) : gen_(seed ^ (tag * 0xD1B54A32D192ED03ULL)) {}
  uint64_t next() { return gen_.next(); }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n), n >= 1.
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }

 private:
  tp::cpp::SplitMix64 gen_;
};

/// The tag of each random decision. Values are fixed forever: changing one changes every
/// augmented sample of every run that used it.
enum : uint64_t {
  kTagCrop = 1,
  kTagFlip = 2,
  kTagBrightness = 3,
  kTagContrast = 4,
  kTagSaturation = 5,
  kTagAugmentOp = 6,     ///< RandAugment / TrivialAugment: which op (one draw per op)
  kTagAugmentSign = 7,   ///< ... whether a signed magnitude is negated (one draw per op)
  kTagAugmentBin = 8,    ///< TrivialAugment: the magnitude bin
  kTagErase = 9,         ///< random_erasing: apply or not, then the box draws
  kTagEraseValue = 10,   ///< random_erasing with value "random": the normal values
};

}  // namespace tp::datasets
