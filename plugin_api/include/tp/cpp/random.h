// torchhost C++ helpers for plugin authors: deterministic random numbers that are the same on
// every platform and compiler (PLG-8), without LibTorch (Tier S and T alike).
//
//   uint64_t key = tp::cpp::splitmix64(ctx.seed ^ index);    // a well-mixed 64-bit value
//   tp::cpp::SplitMix64 rng(seed);                            // a small generator
//   const uint64_t draw = rng.next();
//   const std::vector<bool> held_out = tp::cpp::seeded_holdout(rows, 0.1, split_seed, "csv", "rows");
//   tp::cpp::SplitMix64 view_1(tp::cpp::derived_seed(seed, "view_1"));  // an independent stream
//
// SplitMix64 (Steele, Lea & Flood 2014) is fixed by its three constants below, so a value drawn
// here never changes across releases: datasets derive sample contents and splits from it, and a
// changed draw would change every run that used them.
#ifndef TP_CPP_RANDOM_H
#define TP_CPP_RANDOM_H

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tp/cpp/guard.h"
#include "tp/status.h"

namespace tp::cpp {

/// SplitMix64's output function of x: z = x + 0x9E3779B97F4A7C15, then two xor-shift-multiply
/// rounds and a final xor-shift. A bijection on 64-bit values with good avalanche; pure.
constexpr uint64_t splitmix64(uint64_t x) noexcept {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// FNV-1a, 64-bit, of the bytes of `text`: offset basis 0xCBF29CE484222325, prime
/// 0x100000001B3, one byte at a time (unsigned). Fixed forever, like splitmix64: derived_seed
/// names streams with it. Not for hash tables fed by untrusted input (no seed, easy collisions).
constexpr uint64_t fnv1a64(std::string_view text) noexcept {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (const char c : text) {
    h ^= static_cast<uint64_t>(static_cast<unsigned char>(c));
    h *= 0x100000001B3ULL;
  }
  return h;
}

/// An independent seed for the random stream named `purpose` from one `seed` (a sample's
/// tp_worker_ctx_t.seed, or any seed of yours): exactly splitmix64(seed ^ fnv1a64(purpose)).
/// Distinct names give unrelated seeds, the same name the same seed, on every platform and in
/// every release (PLG-8), so two augmented views of one sample drawn from derived_seed(seed,
/// "view_0") and derived_seed(seed, "view_1") differ, and stay the same across runs and resumes.
///
/// Example:
///   for (int v = 0; v < views; ++v) {
///     tp::cpp::SplitMix64 rng(tp::cpp::derived_seed(ctx.seed("views"), "view_" + std::to_string(v)));
///     ...
///   }
constexpr uint64_t derived_seed(uint64_t seed, std::string_view purpose) noexcept {
  return splitmix64(seed ^ fnv1a64(purpose));
}

/// The SplitMix64 generator: each next() returns splitmix64(state) and advances the state by the
/// golden-ratio increment. A few ns per draw; not thread-safe (give each thread or each decision
/// its own, seeded from the sample seed).
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) noexcept : state_(seed) {}
  /// The next 64 random bits.
  constexpr uint64_t next() noexcept {
    const uint64_t out = splitmix64(state_);
    state_ += 0x9E3779B97F4A7C15ULL;
    return out;
  }

 private:
  uint64_t state_;
};

/// A seeded hold-out split of n items (a `val_split` key): entry i is true when item i is held
/// out. round(n * fraction) items are held out, chosen by a Fisher-Yates shuffle of 0..n-1 driven
/// by SplitMix64(seed) (j = next() % (i + 1), i from n - 1 down to 1: modulo bias below 2^-40
/// for any realistic n); both parts keep their order. A pure function of (n, fraction, seed).
/// Throws Failure(TP_ERR_CONFIG, "<component>: val_split = <fraction> of <n> <items> leaves an
/// empty train or val split") when either part would be empty.
inline std::vector<bool> seeded_holdout(uint64_t n, double fraction, uint64_t seed, const char* component,
                                        const char* items) {
  const auto k = static_cast<uint64_t>(static_cast<double>(n) * fraction + 0.5);
  if (k == 0 || k >= n)
    throw Failure(TP_ERR_CONFIG, std::string(component) + ": val_split = " + std::to_string(fraction) + " of " +
                                     std::to_string(n) + " " + items + " leaves an empty train or val split");
  std::vector<uint64_t> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = i;
  SplitMix64 rng(seed);
  for (uint64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  std::vector<bool> held_out(n, false);
  for (uint64_t i = 0; i < k; ++i) held_out[perm[i]] = true;
  return held_out;
}

}  // namespace tp::cpp

#endif  // TP_CPP_RANDOM_H
