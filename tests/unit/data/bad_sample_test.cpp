// data.on_bad_sample: a source that fails on chosen indices, read with both policies and several
// worker counts. "fail" names the source, the index and the file; "skip" drops exactly the
// failing samples (an all-bad batch comes back empty, so the epoch keeps its batch count), counts them, and is identical for any
// num_workers and across epochs.
#include <ATen/ops/scalar_tensor.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tp/framework/data/data_loader.h"

namespace {

/// Samples {"x": int64 index}; get() throws for the indices in `bad`, naming a file as an image
/// dataset would.
class FailingSource : public tp::SampleSource {
 public:
  FailingSource(uint64_t size, std::set<uint64_t> bad) : size_(size), bad_(std::move(bad)) {}
  uint64_t size() const override { return size_; }
  bool serial() const override { return false; }
  void set_epoch(uint64_t) override {}
  std::string name() const override { return "org.test.failing (train)"; }
  tp::NamedTensors get(uint64_t index, const tp_worker_ctx_t&) const override {
    if (bad_.count(index) != 0)
      throw std::runtime_error("image_folder: cannot decode '/data/img_" + std::to_string(index) + ".png'");
    return {{"x", at::scalar_tensor(static_cast<int64_t>(index), at::kLong)}};
  }

 private:
  uint64_t size_;
  std::set<uint64_t> bad_;
};

struct EpochResult {
  std::vector<std::vector<int64_t>> batches;
  int64_t skipped = 0;
  std::vector<uint64_t> first_skipped;
};

EpochResult read_epoch(tp::DataLoader& loader, uint64_t epoch) {
  EpochResult r;
  loader.start_epoch(epoch);
  while (auto batch = loader.next()) {
    if (batch->empty()) {  // every sample of the batch was skipped
      r.batches.emplace_back();
      continue;
    }
    const at::Tensor x = batch->front().second.contiguous();
    r.batches.emplace_back(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel());
  }
  r.skipped = loader.skipped_count();
  for (const auto& s : loader.first_skipped()) r.first_skipped.push_back(s.index);
  return r;
}

}  // namespace

TEST_CASE("on_bad_sample = fail: the error names the source, the index and the file") {
  for (int64_t workers : {0, 2}) {
    auto source = std::make_shared<FailingSource>(12, std::set<uint64_t>{7});
    tp::DataLoader loader(source, tp::LoaderOptions().batch_size(4).num_workers(workers).shuffle(false));
    loader.start_epoch(0);
    try {
      // Batch 0 (samples 0-3) may or may not come first: with workers, the failure of batch 1
      // can stop the epoch before it is returned (data_loader.h, Errors).
      while (loader.next()) {
      }
      FAIL("expected a SampleError");
    } catch (const tp::SampleError& e) {
      const std::string what = e.what();
      CHECK(e.index() == 7);
      CHECK(what.find("org.test.failing (train)") != std::string::npos);
      CHECK(what.find("sample 7") != std::string::npos);
      CHECK(what.find("/data/img_7.png") != std::string::npos);
      CHECK(what.find("on_bad_sample") != std::string::npos);
    }
  }
}

TEST_CASE("on_bad_sample = skip drops exactly the bad samples and returns an all-bad batch empty") {
  // Batches of 4, unshuffled: {0..3} {4..7} {8..11} {12..15} {16..19}; 8..11 is all bad. The
  // empty batch keeps the epoch at batches_per_epoch() batches, which accumulation windows and
  // data-parallel ranks count on (a passed-over batch ended epochs inside a window).
  const std::set<uint64_t> bad{2, 8, 9, 10, 11, 17};
  for (int64_t workers : {0, 2}) {
    auto source = std::make_shared<FailingSource>(20, bad);
    tp::DataLoader loader(source, tp::LoaderOptions()
                                      .batch_size(4)
                                      .num_workers(workers)
                                      .shuffle(false)
                                      .on_bad_sample(tp::BadSamplePolicy::kSkip));
    const EpochResult r = read_epoch(loader, 0);
    const std::vector<std::vector<int64_t>> expected{{0, 1, 3}, {4, 5, 6, 7}, {}, {12, 13, 14, 15}, {16, 18, 19}};
    CHECK(r.batches == expected);
    CHECK(static_cast<int64_t>(r.batches.size()) == loader.batches_per_epoch());
    CHECK(r.skipped == 6);
    CHECK(r.first_skipped == std::vector<uint64_t>{2, 8, 9, 10, 11});  // sampler order, first kKeptSkips
    CHECK(loader.first_skipped().front().message.find("/data/img_2.png") != std::string::npos);
  }
}

TEST_CASE("on_bad_sample = skip is deterministic for any num_workers, shuffled, and per epoch") {
  std::set<uint64_t> bad;
  for (uint64_t i = 0; i < 100; i += 7) bad.insert(i);
  std::vector<EpochResult> reference;
  for (int64_t workers : {0, 1, 3, 5}) {
    auto source = std::make_shared<FailingSource>(100, bad);
    tp::DataLoader loader(source, tp::LoaderOptions()
                                      .batch_size(6)
                                      .num_workers(workers)
                                      .prefetch(1)
                                      .seed(42)
                                      .on_bad_sample(tp::BadSamplePolicy::kSkip));
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      const EpochResult r = read_epoch(loader, epoch);
      CHECK(r.skipped == static_cast<int64_t>(bad.size()));  // the count resets every epoch
      int64_t total = 0;
      for (const auto& b : r.batches) {
        total += static_cast<int64_t>(b.size());
        for (int64_t x : b) CHECK(bad.count(static_cast<uint64_t>(x)) == 0);
      }
      CHECK(total == 100 - static_cast<int64_t>(bad.size()));
      if (workers == 0) {
        reference.push_back(r);
      } else {
        CHECK(r.batches == reference[epoch].batches);
        CHECK(r.first_skipped == reference[epoch].first_skipped);
      }
    }
  }
  CHECK(reference[0].batches != reference[1].batches);  // shuffled differently per epoch
}
