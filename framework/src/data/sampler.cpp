#include "tp/framework/data/sampler.h"

#include <algorithm>
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

// Fisher–Yates from the back over [first, last): i = size .. 2, swap element i - 1 with j uniform
// in [0, i - 1] (epoch_permutation's algorithm, sampler.h).
void shuffle_range(std::vector<uint64_t>::iterator first, std::vector<uint64_t>::iterator last,
                   std::mt19937_64& gen) {
  for (auto i = static_cast<uint64_t>(last - first); i > 1; --i) {
    const uint64_t j = uniform_below(gen, i);
    std::swap(first[static_cast<std::ptrdiff_t>(i - 1)], first[static_cast<std::ptrdiff_t>(j)]);
  }
}

// The first position of this rank's run in the (padded) sequence of n samples.
uint64_t run_start(uint64_t n, uint64_t world, uint64_t rank, SamplerTail tail, uint64_t count) {
  if (tail != SamplerTail::kExact) return rank * count;
  return rank * (n / world) + std::min(rank, n % world);  // ranks < n % world hold one more
}

}  // namespace

DistributedSampler::DistributedSampler(SamplerOptions options) : options_(std::move(options)) {
  TP_CHECK(options_.world_size() >= 1, "DistributedSampler: world_size must be >= 1, got ",
           options_.world_size());
  TP_CHECK(options_.rank() >= 0 && options_.rank() < options_.world_size(),
           "DistributedSampler: rank must be in [0, ", options_.world_size(), "), got ",
           options_.rank());
  TP_CHECK(options_.group_window() >= 1, "DistributedSampler: group_window must be >= 1, got ",
           options_.group_window());
  TP_CHECK(options_.block() >= 1, "DistributedSampler: block must be >= 1, got ", options_.block());
  const std::vector<uint64_t>& ends = options_.group_ends();
  for (std::size_t g = 0; g < ends.size(); ++g)
    TP_CHECK(ends[g] > (g == 0 ? 0 : ends[g - 1]), "DistributedSampler: group ", g, " ends at ", ends[g],
             ", not after its start");
  TP_CHECK(ends.empty() || ends.back() == options_.dataset_size(), "DistributedSampler: the last group ends at ",
           ends.empty() ? 0 : ends.back(), ", not at the dataset size ", options_.dataset_size());
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
    case SamplerTail::kExact: {
      if (!options_.group_ends().empty() || options_.block() <= 1) return n > rank ? (n - rank + world - 1) / world : 0;
      const uint64_t block = options_.block();
      const uint64_t blocks = (n + block - 1) / block;
      if (blocks <= rank) return 0;
      const uint64_t mine = (blocks - rank + world - 1) / world;  // blocks rank, rank + world, ...
      const bool holds_short_last = n % block != 0 && (blocks - 1) % world == rank;
      return mine * block - (holds_short_last ? block - n % block : 0);
    }
  }
  return 0;
}

std::vector<uint64_t> DistributedSampler::indices() const {
  if (!options_.group_ends().empty()) return grouped_indices();
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
  // kExact in blocks: blocks rank, rank + world, ... of the permutation, each whole (the last may
  // be short).
  if (options_.tail() == SamplerTail::kExact && options_.block() > 1) {
    const uint64_t block = options_.block();
    for (uint64_t start = rank * block; start < n; start += world * block)
      for (uint64_t p = start; p < std::min(n, start + block); ++p) out.push_back(perm[p]);
    return out;
  }
  // Position p of the padded sequence is perm[p % n] (PyTorch repeats the list as often as needed
  // when the padding exceeds n, which only happens when world > n). kDrop and kExact never reach
  // past n - 1 by construction of size().
  for (uint64_t k = 0; k < count; ++k) out.push_back(perm[(rank + k * world) % n]);
  return out;
}

std::vector<uint64_t> DistributedSampler::grouped_indices() const {
  const std::vector<uint64_t>& ends = options_.group_ends();
  const uint64_t n = options_.dataset_size();
  const auto world = static_cast<uint64_t>(options_.world_size());
  const auto rank = static_cast<uint64_t>(options_.rank());
  const uint64_t count = size();
  std::vector<uint64_t> out;
  if (count == 0) return out;
  out.reserve(count);

  // 1. The sequence S: whole groups in the epoch's group order. `first_of_group[p]` marks where
  //    a group begins in S (1 byte per sample, beside S's 8).
  const uint64_t groups = ends.size();
  std::vector<uint64_t> order;
  if (options_.shuffle()) {
    order = epoch_permutation(groups, options_.seed(), epoch_);
  } else {
    order.resize(groups);
    std::iota(order.begin(), order.end(), uint64_t{0});
  }
  std::vector<uint64_t> sequence;
  std::vector<bool> first_of_group(n, false);
  sequence.reserve(n);
  for (const uint64_t g : order) {
    first_of_group[sequence.size()] = true;
    for (uint64_t i = g == 0 ? 0 : ends[g - 1]; i < ends[g]; ++i) sequence.push_back(i);
  }
  // 2. This rank's contiguous run; the kPad tail wraps to the start of S.
  const uint64_t start = run_start(n, world, rank, options_.tail(), count);
  for (uint64_t k = 0; k < count; ++k) out.push_back(sequence[(start + k) % n]);
  if (!options_.shuffle()) return out;
  // 3. Windows of group_window group pieces, each shuffled on its own.
  const uint64_t run_seed = mix_seed(mix_seed(mix_seed(options_.seed()) ^ epoch_) ^ rank);
  uint64_t window = 0, pieces = 0, window_begin = 0;
  for (uint64_t k = 0; k <= count; ++k) {
    const bool piece_starts = k == count || (k > 0 && first_of_group[(start + k) % n]);
    if (!piece_starts) continue;
    if (k < count && ++pieces < options_.group_window()) continue;
    std::mt19937_64 gen(mix_seed(run_seed ^ window));
    shuffle_range(out.begin() + static_cast<std::ptrdiff_t>(window_begin), out.begin() + static_cast<std::ptrdiff_t>(k),
                  gen);
    ++window;
    pieces = 0;
    window_begin = k;
  }
  return out;
}

std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  std::mt19937_64 gen(mix_seed(mix_seed(seed) ^ epoch));
  shuffle_range(perm.begin(), perm.end(), gen);
  return perm;
}

}  // namespace tp
