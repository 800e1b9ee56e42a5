// DistributedSampler over a dataset stored in contiguous groups (tar shards; plugin ABI 1.10):
// every sample once per epoch over the ranks, each rank one contiguous run of the group order, the
// samples shuffled only within windows of data.group_window groups, the counts and tails of the
// ungrouped sampler, and the loader reading that order for any number of workers and from a
// resume position.
#include <ATen/core/Tensor.h>
#include <ATen/ops/scalar_tensor.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "tp/framework/data/data_loader.h"
#include "tp/framework/data/sampler.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

using tp::DistributedSampler;
using tp::SamplerOptions;
using tp::SamplerTail;
using Idx = std::vector<uint64_t>;

namespace {

// Groups of uneven sizes, as shards are (the last one short): ends of 7, 3, 5, 1, 6, 2 samples.
const Idx kEnds = {7, 10, 15, 16, 22, 24};
constexpr uint64_t kSize = 24;

DistributedSampler grouped(int64_t rank, int64_t world, SamplerTail tail, bool shuffle = true, uint64_t window = 2,
                           uint64_t epoch = 0) {
  DistributedSampler s(SamplerOptions(kSize)
                           .rank(rank)
                           .world_size(world)
                           .tail(tail)
                           .shuffle(shuffle)
                           .seed(5)
                           .group_window(window)
                           .group_ends(kEnds));
  s.set_epoch(epoch);
  return s;
}

uint64_t group_of(uint64_t index) {
  return static_cast<uint64_t>(std::upper_bound(kEnds.begin(), kEnds.end(), index) - kEnds.begin());
}

// For each group in `order`, the distinct groups read between its first and last sample: a group
// read inside one window of `window` groups never spans more than `window` groups.
std::size_t widest_span(const Idx& order) {
  std::size_t widest = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const uint64_t g = group_of(order[i]);
    std::size_t last = i;
    for (std::size_t j = i; j < order.size(); ++j)
      if (group_of(order[j]) == g) last = j;
    std::set<uint64_t> span;
    for (std::size_t j = i; j <= last; ++j) span.insert(group_of(order[j]));
    widest = std::max(widest, span.size());
  }
  return widest;
}

}  // namespace

TEST_CASE("grouped sampler: without shuffle, ranks read contiguous runs in index order, every sample once") {
  for (int64_t world = 1; world <= 5; ++world) {
    Idx all;
    for (int64_t r = 0; r < world; ++r) {
      const Idx run = grouped(r, world, SamplerTail::kExact, false).indices();
      CHECK(run.size() == grouped(r, world, SamplerTail::kExact, false).size());
      for (std::size_t k = 1; k < run.size(); ++k) CHECK(run[k] == run[k - 1] + 1);
      all.insert(all.end(), run.begin(), run.end());
    }
    Idx expected(kSize);
    std::iota(expected.begin(), expected.end(), uint64_t{0});
    CHECK(all == expected);  // rank 0's run first, then rank 1's, ...: the split in order
  }
}

TEST_CASE("grouped sampler: shuffled, the ranks' runs are disjoint and cover the dataset in every epoch") {
  for (int64_t world = 1; world <= 4; ++world) {
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::multiset<uint64_t> seen;
      for (int64_t r = 0; r < world; ++r) {
        const Idx run = grouped(r, world, SamplerTail::kExact, true, 2, epoch).indices();
        seen.insert(run.begin(), run.end());
      }
      CHECK(seen.size() == kSize);
      for (uint64_t i = 0; i < kSize; ++i) CHECK(seen.count(i) == 1);
    }
  }
}

TEST_CASE("grouped sampler: a window of W groups never mixes more than W groups, and W = 1 reads groups whole") {
  for (uint64_t window : {1, 2, 3}) {
    for (uint64_t epoch = 0; epoch < 4; ++epoch) {
      const Idx order = grouped(0, 1, SamplerTail::kExact, true, window, epoch).indices();
      CHECK(widest_span(order) <= window);
    }
  }
  // W = 1: each group's samples are consecutive, and within the group they are shuffled.
  const Idx order = grouped(0, 1, SamplerTail::kExact, true, 1, 0).indices();
  bool some_group_reordered = false;
  for (std::size_t k = 0; k < order.size();) {
    std::size_t end = k;
    while (end < order.size() && group_of(order[end]) == group_of(order[k])) ++end;
    Idx piece(order.begin() + static_cast<std::ptrdiff_t>(k), order.begin() + static_cast<std::ptrdiff_t>(end));
    Idx sorted = piece;
    std::sort(sorted.begin(), sorted.end());
    const uint64_t g = group_of(order[k]);
    const uint64_t begin = g == 0 ? 0 : kEnds[g - 1];
    CHECK(sorted.front() == begin);  // the whole group, read in one piece
    CHECK(sorted.back() == kEnds[g] - 1);
    CHECK(sorted.size() == kEnds[g] - begin);
    some_group_reordered = some_group_reordered || piece != sorted;
    k = end;
  }
  CHECK(some_group_reordered);
}

TEST_CASE("grouped sampler: the group order changes with the epoch and repeats for the same seed and epoch") {
  const Idx e0 = grouped(0, 1, SamplerTail::kExact, true, 2, 0).indices();
  CHECK(e0 == grouped(0, 1, SamplerTail::kExact, true, 2, 0).indices());
  CHECK(e0 != grouped(0, 1, SamplerTail::kExact, true, 2, 1).indices());
  std::vector<uint64_t> first_groups;
  for (uint64_t epoch = 0; epoch < 8; ++epoch)
    first_groups.push_back(group_of(grouped(0, 1, SamplerTail::kExact, true, 1, epoch).indices().front()));
  CHECK(std::set<uint64_t>(first_groups.begin(), first_groups.end()).size() > 1);
}

TEST_CASE("grouped sampler: the tails count as without groups; kPad repeats the start of the order") {
  for (int64_t world : {2, 3, 5, 7}) {
    std::multiset<uint64_t> padded;
    for (int64_t r = 0; r < world; ++r) {
      for (SamplerTail tail : {SamplerTail::kPad, SamplerTail::kDrop, SamplerTail::kExact}) {
        const DistributedSampler with = grouped(r, world, tail);
        const DistributedSampler without(SamplerOptions(kSize).rank(r).world_size(world).tail(tail).seed(5));
        CHECK(with.size() == without.size());
        CHECK(with.indices().size() == without.size());
      }
      const Idx run = grouped(r, world, SamplerTail::kPad).indices();
      padded.insert(run.begin(), run.end());
    }
    // Every sample at least once; the pad adds (ceil(n / world) * world - n) repeats.
    for (uint64_t i = 0; i < kSize; ++i) CHECK(padded.count(i) >= 1);
    CHECK(padded.size() == (kSize + world - 1) / world * world);
  }
}

TEST_CASE("grouped sampler: malformed group ends are refused") {
  auto build = [](Idx ends, uint64_t window = 2) {
    return DistributedSampler(SamplerOptions(kSize).group_window(window).group_ends(std::move(ends)));
  };
  CHECK_THROWS_AS(build({7, 7, 24}), tp::Error);   // an empty group
  CHECK_THROWS_AS(build({10, 7, 24}), tp::Error);  // decreasing
  CHECK_THROWS_AS(build({7, 20}), tp::Error);      // does not reach the size
  CHECK_THROWS_AS(build(kEnds, 0), tp::Error);     // window 0
  CHECK_NOTHROW(build({kSize}));                   // one group: the whole dataset
}

namespace {

// A source of `kSize` scalar samples stored in kEnds' groups.
class GroupedSource : public tp::SampleSource {
 public:
  uint64_t size() const override { return kSize; }
  tp::NamedTensors get(uint64_t index, const tp_worker_ctx_t&) const override {
    tp::NamedTensors out;
    out.emplace_back("x", at::scalar_tensor(static_cast<int64_t>(index), at::kLong));
    return out;
  }
  bool serial() const override { return false; }
  void set_epoch(uint64_t) override {}
  std::string name() const override { return "grouped"; }
  const std::vector<uint64_t>& sample_groups() const override { return kEnds; }
};

Idx read_epoch(int64_t workers, int64_t start_batch, int64_t rank = 0, int64_t world = 1) {
  tp::DataLoader loader(std::make_shared<GroupedSource>(), tp::LoaderOptions()
                                                               .batch_size(5)
                                                               .num_workers(workers)
                                                               .seed(5)
                                                               .group_window(2)
                                                               .rank(rank)
                                                               .world_size(world)
                                                               .start_batch(start_batch));
  loader.start_epoch(1);
  Idx out;
  while (auto batch = loader.next()) {
    const at::Tensor x = batch->front().second;
    for (int64_t i = 0; i < x.size(0); ++i) out.push_back(static_cast<uint64_t>(x[i].item<int64_t>()));
  }
  return out;
}

}  // namespace

TEST_CASE("grouped loader: the sampler's order for any number of workers, and a resume continues it exactly") {
  const Idx expected = grouped(0, 1, SamplerTail::kPad, true, 2, 1).indices();
  CHECK(read_epoch(0, 0) == expected);
  CHECK(read_epoch(3, 0) == expected);
  const Idx resumed = read_epoch(2, 2);  // batches 2.. of the epoch: samples 10..
  CHECK(resumed == Idx(expected.begin() + 10, expected.end()));
  CHECK(read_epoch(2, 0, 1, 2) == grouped(1, 2, SamplerTail::kPad, true, 2, 1).indices());
}
