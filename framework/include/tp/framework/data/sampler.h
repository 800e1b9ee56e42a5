// Which sample indices this rank reads in an epoch: a seeded, epoch-dependent permutation that is
// identical on every rank, sharded by stride (indices[rank::world_size]) as PyTorch's
// DistributedSampler does (exact evaluation: in whole batches, SamplerOptions::block); or, for a dataset stored in contiguous groups (tar shards, chunks:
// plugin ABI 1.10), a permutation of the groups with the samples shuffled only within a window
// of groups, cut into one contiguous run per rank. Pure functions of (seed, epoch, rank,
// world_size, dataset size, groups): no communication, no global RNG state, reproducible across
// platforms and standard libraries.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tp {

/// What happens to the tail when the dataset size is not a multiple of world_size.
enum class SamplerTail {
  /// Repeat indices from the start of the permutation until every rank has ceil(n / world) samples
  /// (PyTorch's default, `drop_last=False`). Some samples are seen twice per epoch: fine for
  /// training, wrong for evaluation metrics (ARCH-8).
  kPad,
  /// Drop the last n % world indices of the permutation so every rank has floor(n / world)
  /// samples (PyTorch `drop_last=True`). Which indices are dropped changes with the epoch when
  /// shuffling.
  kDrop,
  /// Exact evaluation: rank r gets permutation[r::world] of the unpadded permutation (in blocks of
  /// SamplerOptions::block positions where that is above 1). Shards are disjoint, their union is
  /// the dataset, and their sizes differ by at most one block (ranks r < n % world hold one more).
  /// Ranks may therefore run a different number of batches.
  kExact,
};

/// Options of DistributedSampler (fluent setters, validated by the constructor).
///
/// Example:
///   auto opts = tp::SamplerOptions(50000).rank(1).world_size(4).seed(42).tail(tp::SamplerTail::kDrop);
struct SamplerOptions {
  /// `dataset_size` is the number of samples of the whole dataset (all ranks).
  explicit SamplerOptions(uint64_t dataset_size) : dataset_size_(dataset_size) {}

  // TORCH_ARG-style: `name(v)` sets and returns *this, `name()` reads.
#define TP_SAMPLER_ARG(T, name)                 \
  SamplerOptions& name(T value) noexcept {      \
    name##_ = value;                            \
    return *this;                               \
  }                                             \
  T name() const noexcept { return name##_; }   \
  T name##_

  /// Number of samples in the whole dataset.
  TP_SAMPLER_ARG(uint64_t, dataset_size) = 0;
  /// This process's rank, 0 <= rank < world_size.
  TP_SAMPLER_ARG(int64_t, rank) = 0;
  /// Number of ranks, >= 1.
  TP_SAMPLER_ARG(int64_t, world_size) = 1;
  /// Permute with epoch_permutation(seed, epoch); false = identity order 0..n-1.
  TP_SAMPLER_ARG(bool, shuffle) = true;
  /// Run seed; must be equal on all ranks.
  TP_SAMPLER_ARG(uint64_t, seed) = 0;
  /// Tail policy; see SamplerTail.
  TP_SAMPLER_ARG(SamplerTail, tail) = SamplerTail::kPad;
  /// With groups: how many consecutive groups of the epoch's group order form one window, inside
  /// which the samples are shuffled (>= 1; `data.group_window`). Ignored without groups.
  TP_SAMPLER_ARG(uint64_t, group_window) = 4;
  /// kExact only (>= 1): the permutation is dealt to the ranks in blocks of this many consecutive
  /// positions, round robin (block j to rank j mod world). With the batch size here, rank r's k-th
  /// batch holds the samples one process reads as its (k world + r)-th batch: a padded batch (images
  /// of different sizes) pads alike and a kernel sees the same batch whatever the rank count. 1:
  /// stride, PyTorch's DistributedSampler. Ignored for the other tails and with groups.
  TP_SAMPLER_ARG(uint64_t, block) = 1;
#undef TP_SAMPLER_ARG

  /// The contiguous groups the samples are stored in, as SampleSource::sample_groups() gives them
  /// (each group's end index, strictly increasing, the last = dataset_size); empty: independent
  /// samples. Validated by the DistributedSampler constructor.
  SamplerOptions& group_ends(std::vector<uint64_t> ends) {
    group_ends_ = std::move(ends);
    return *this;
  }
  /// The group ends set (empty: no groups).
  const std::vector<uint64_t>& group_ends() const noexcept { return group_ends_; }

 private:
  std::vector<uint64_t> group_ends_;
};

/// Shards a dataset across ranks for one epoch at a time.
///
/// Order: the epoch permutation P (or 0..n-1 without shuffle) is padded or truncated to `total`
/// entries according to the tail policy, and rank r reads P[r], P[r + world], P[r + 2 world], ...
///
/// Order with groups (options.group_ends() not empty): the sequence S is the samples of every
/// group, group after group in the order epoch_permutation(groups, seed, epoch) (identity without
/// shuffle), each group's samples in index order. Rank r reads one contiguous run of S: positions
/// [r c, (r + 1) c) with c = size() for kPad (position p is S[p mod n], so the pad repeats the
/// start of S) and kDrop, and for kExact the run of size() samples after those of ranks < r. So
/// the ranks' runs are disjoint, balanced to one sample, and each cuts at most two groups (shared
/// with its neighbours). Then, with shuffle, the run is cut into windows of group_window
/// consecutive group pieces and each window's samples are permuted (a std::mt19937_64 seeded from
/// (seed, epoch, rank, window), Fisher–Yates as epoch_permutation). A reader touches at most one
/// window of groups at a time, reading each group's samples close together; the same n and
/// counts per rank as without groups, so batches_per_epoch and resume positions are unchanged.
///
/// Example (n = 10, world = 3, shuffle off):
///   kPad:   rank 0 {0,3,6,9}  rank 1 {1,4,7,0}  rank 2 {2,5,8,1}   (4 each, 0 and 1 twice)
///   kDrop:  rank 0 {0,3,6}    rank 1 {1,4,7}    rank 2 {2,5,8}     (3 each, 9 dropped)
///   kExact: rank 0 {0,3,6,9}  rank 1 {1,4,7}    rank 2 {2,5,8}     (4 + 3 + 3 = 10)
///   kExact, block 2: rank 0 {0,1,6,7}  rank 1 {2,3,8,9}  rank 2 {4,5}  (one process's batches of
///                    2 are {0,1} {2,3} {4,5} {6,7} {8,9}: the same batches, dealt round robin)
class DistributedSampler {
 public:
  /// Throws tp::Error when world_size < 1 or rank is outside [0, world_size).
  explicit DistributedSampler(SamplerOptions options);

  /// Selects the epoch whose permutation indices() returns. Call with the same value on all ranks.
  void set_epoch(uint64_t epoch) noexcept { epoch_ = epoch; }
  /// The epoch last set (0 initially).
  uint64_t epoch() const noexcept { return epoch_; }

  /// This rank's dataset indices for the current epoch, in reading order. Same result for the
  /// same (options, epoch) on any machine. O(dataset_size) time and memory per call.
  std::vector<uint64_t> indices() const;

  /// Number of indices this rank reads per epoch (indices().size(), without building it).
  /// kExact: ceil((n - rank) / world); kPad: ceil(n / world); kDrop: floor(n / world).
  uint64_t size() const noexcept;

  /// The options it was built with.
  const SamplerOptions& options() const noexcept { return options_; }

 private:
  /// indices() for a dataset with groups (see "Order with groups").
  std::vector<uint64_t> grouped_indices() const;

  SamplerOptions options_;
  uint64_t epoch_ = 0;
};

/// The shuffled order of 0..n-1 for (seed, epoch), identical on every platform:
/// a std::mt19937_64 (fully specified by the C++ standard) seeded with
/// mix_seed(mix_seed(seed) ^ epoch), then Fisher–Yates from the back (i = n-1 .. 1, swap i with j
/// uniform in [0, i]), where j is drawn by rejection sampling on the raw 64-bit output, not by
/// std::uniform_int_distribution, whose algorithm is implementation-defined.
/// Not the same order as PyTorch's torch.randperm.
std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

/// SplitMix64's output function of x (Steele, Lea & Flood 2014): a bijective 64-bit mixer.
/// z = x + 0x9E3779B97F4A7C15; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
/// z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31.
constexpr uint64_t mix_seed(uint64_t x) noexcept {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// The seed a sample sees in tp_worker_ctx_t::seed:
/// mix_seed(mix_seed(mix_seed(mix_seed(run_seed) ^ rank) ^ epoch) ^ index).
/// It depends on the dataset index, never on the worker that loads it, so results are the same
/// for any num_workers. `rank` is cast to uint64_t.
constexpr uint64_t sample_seed(uint64_t run_seed, int64_t rank, uint64_t epoch,
                               uint64_t index) noexcept {
  uint64_t h = mix_seed(run_seed);
  h = mix_seed(h ^ static_cast<uint64_t>(rank));
  h = mix_seed(h ^ epoch);
  return mix_seed(h ^ index);
}

}  // namespace tp
