#include "tp/framework/data/sampler.h"

#include <numeric>
#include <random>
#include <utility>

#include "tp/framework/error.h"

namespace tp {
namespace {

// Uniform in [0, bound) without modulo bias: reject raw draws below 2^64 mod bound, so the
// accepted range is a whole number of `bound`-sized blocks. Expected draws < 2 for any bound.
// Written out because std::uniform_int_distribution differs between libstdc++, libc++ and MSVC.
uint64_t uniform_below(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  for (;;) {
    const uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

DistributedSampler::DistributedSampler(SamplerOptions options) : options_(std::move(options)) {
  TP_CHECK(options_.world_size() >= 1, "DistributedSampler: world_size must be >= 1, got ",
           options_.world_size());
  TP_CHECK(options_.rank() >= 0 && options_.rank() < options_.world_size(),
           "DistributedSampler: rank must be in [0, ", options_.world_size(), "), got ",
           options_.rank());
}

uint64_t DistributedSampler::size() const noexcept {
  const uint64_t n = options_.dataset_size();
  const auto world = static_cast<uint64_t>(options_.world_size());
  const auto rank = static_cast<uint64_t>(options_.rank());
  switch (options_.tail()) {
    case SamplerTail::kPad:
      return (n + world - 1) / world;
    case SamplerTail::kDrop:
      return n / world;
    case SamplerTail::kExact:
      return n > rank ? (n - rank + world - 1) / world : 0;
  }
  return 0;
}

std::vector<uint64_t> DistributedSampler::indices() const {
  const uint64_t n = options_.dataset_size();
  const auto world = static_cast<uint64_t>(options_.world_size());
  const auto rank = static_cast<uint64_t>(options_.rank());
  const uint64_t count = size();
  std::vector<uint64_t> out;
  out.reserve(count);
  if (count == 0) return out;

  // Every rank builds the whole permutation (8 bytes per sample, a few ns per element) and keeps
  // its stride; that is what makes the ranks agree without communicating.
  std::vector<uint64_t> perm;
  if (options_.shuffle()) {
    perm = epoch_permutation(n, options_.seed(), epoch_);
  } else {
    perm.resize(n);
    std::iota(perm.begin(), perm.end(), uint64_t{0});
  }
  // Position p of the padded sequence is perm[p % n] (PyTorch repeats the list as often as needed
  // when the padding exceeds n, which only happens when world > n). kDrop and kExact never reach
  // past n - 1 by construction of size().
  for (uint64_t k = 0; k < count; ++k) out.push_back(perm[(rank + k * world) % n]);
  return out;
}

std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  std::mt19937_64 gen(mix_seed(mix_seed(seed) ^ epoch));
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = uniform_below(gen, i);  // j in [0, i - 1]
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

}  // namespace tp
