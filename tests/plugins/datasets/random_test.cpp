// tp/cpp/random.h: splitmix64, the SplitMix64 generator and seeded_holdout draw exactly what the
// copies they replaced drew (csv, image_folder's listing split and Rng, shapes' mix64), so every
// sample and every val_split of an existing run stays the same. The reference functions below are
// those copies, verbatim.
#include "tp/cpp/random.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

// shapes_render.cpp's mix64 and c_dataset.c's: the finaliser.
uint64_t reference_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// csv_dataset.cpp's and image_listing.cpp's splitmix64(state), and image_folder's Rng::next.
uint64_t reference_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// csv_dataset.cpp's split_rows, before the held-out rows were picked out.
std::vector<bool> reference_holdout(uint64_t n, double fraction, uint64_t seed) {
  const auto k = static_cast<uint64_t>(static_cast<double>(n) * fraction + 0.5);
  std::vector<uint64_t> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = i;
  uint64_t state = seed;
  for (uint64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[reference_next(state) % (i + 1)]);
  std::vector<bool> is_val(n, false);
  for (uint64_t i = 0; i < k; ++i) is_val[perm[i]] = true;
  return is_val;
}

}  // namespace

TEST_CASE("random: splitmix64 is SplitMix64's output function, unchanged") {
  // The first output of the reference SplitMix64 seeded with 0 (Vigna's splitmix64.c).
  CHECK(tp::cpp::splitmix64(0) == 0xE220A8397B1DCDAFULL);
  static_assert(tp::cpp::splitmix64(0) == 0xE220A8397B1DCDAFULL, "usable in constant expressions");
  uint64_t x = 1;
  for (int i = 0; i < 1000; ++i) {
    CHECK(tp::cpp::splitmix64(x) == reference_mix64(x));
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

TEST_CASE("random: the SplitMix64 generator draws the sequence of the copies it replaced") {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, ~uint64_t{0}, uint64_t{0xD1B54A32D192ED03ULL}}) {
    tp::cpp::SplitMix64 rng(seed);
    uint64_t state = seed;
    for (int i = 0; i < 100; ++i) CHECK(rng.next() == reference_next(state));
  }
}

TEST_CASE("random: seeded_holdout is the val_split csv and image_folder made, and refuses an empty part") {
  for (const uint64_t n : {uint64_t{2}, uint64_t{9}, uint64_t{100}, uint64_t{1001}}) {
    for (const double fraction : {0.1, 0.25, 0.34, 0.5}) {
      for (const uint64_t seed : {uint64_t{0}, uint64_t{3}, uint64_t{12345}}) {
        const auto k = static_cast<uint64_t>(static_cast<double>(n) * fraction + 0.5);
        if (k == 0 || k >= n) continue;
        const std::vector<bool> held = tp::cpp::seeded_holdout(n, fraction, seed, "csv", "rows");
        CHECK(held == reference_holdout(n, fraction, seed));
        uint64_t count = 0;
        for (const bool b : held) count += b ? 1 : 0;
        CHECK(count == k);
      }
    }
  }
  try {
    (void)tp::cpp::seeded_holdout(3, 0.1, 0, "csv", "rows");
    FAIL("an empty val part was accepted");
  } catch (const tp::cpp::Failure& e) {
    CHECK(e.code() == TP_ERR_CONFIG);
    CHECK(std::string(e.what()) == "csv: val_split = 0.100000 of 3 rows leaves an empty train or val split");
  }
  CHECK_THROWS_AS((void)tp::cpp::seeded_holdout(4, 0.9, 0, "image_folder", "images"), tp::cpp::Failure);
}

TEST_CASE("derived_seed: a named stream of a seed, fixed forever: splitmix64(seed ^ fnv1a64(name))") {
  // FNV-1a 64's published vectors: the empty string is the offset basis; "a" is 0xaf63dc4c8601ec8c.
  CHECK(tp::cpp::fnv1a64("") == 0xCBF29CE484222325ULL);
  CHECK(tp::cpp::fnv1a64("a") == 0xAF63DC4C8601EC8CULL);
  // Pinned: a changed value would change every sample drawn from a named stream.
  CHECK(tp::cpp::derived_seed(12345, "view_0") == 0x7712A79E299AB966ULL);
  CHECK(tp::cpp::derived_seed(12345, "view_1") == 0xCCCD45A0756B7457ULL);
  CHECK(tp::cpp::derived_seed(12345, "view_0") == tp::cpp::splitmix64(12345 ^ tp::cpp::fnv1a64("view_0")));
  // Distinct names, distinct seeds; the same name, the same seed; another seed, another stream.
  std::vector<uint64_t> seen;
  for (int v = 0; v < 64; ++v) seen.push_back(tp::cpp::derived_seed(7, "view_" + std::to_string(v)));
  for (std::size_t i = 0; i < seen.size(); ++i)
    for (std::size_t j = i + 1; j < seen.size(); ++j) CHECK(seen[i] != seen[j]);
  CHECK(tp::cpp::derived_seed(7, "view_3") == seen[3]);
  CHECK(tp::cpp::derived_seed(8, "view_3") != seen[3]);
  static_assert(tp::cpp::derived_seed(1, "crop") == tp::cpp::derived_seed(1, "crop"));  // constexpr
}
