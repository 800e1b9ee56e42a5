// data.sample_timeout_s: a source whose get() blocks on chosen indices until the test releases it,
// as a read from a hung network file system does. With "fail" the loader stops naming the sample
// and the limit; with "skip" the epoch goes on without the sample (a new thread loads its batch
// again) and the next epoch waits for the thread left behind before set_epoch; a serial source
// always fails. The stuck thread is released at the end of every case, and each case waits for
// it to return, so no thread outlives its case.
#include <ATen/ops/scalar_tensor.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tp/framework/data/data_loader.h"

namespace {

/// Samples {"x": int64 index}; get() of an index in `stalls` blocks until release() (once per
/// index when `stall_once`).
class StallingSource : public tp::SampleSource {
 public:
  StallingSource(uint64_t size, std::set<uint64_t> stalls, bool serial = false, bool stall_once = false)
      : size_(size), stalls_(std::move(stalls)), serial_(serial), stall_once_(stall_once) {}
  uint64_t size() const override { return size_; }
  bool serial() const override { return serial_; }
  void set_epoch(uint64_t) override { set_epoch_while_stalled_ = set_epoch_while_stalled_ || stalled_ > 0; }
  std::string name() const override { return "org.test.stalling (train)"; }
  tp::NamedTensors get(uint64_t index, const tp_worker_ctx_t&) const override {
    bool stall = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stall = stalls_.count(index) != 0 && !released_;
      if (stall && stall_once_) stalls_.erase(index);
    }
    if (stall) {
      ++stalled_;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return released_; });
      --stalled_;
    }
    return {{"x", at::scalar_tensor(static_cast<int64_t>(index), at::kLong)}};
  }
  /// Lets every blocked get() return, and later ones not block.
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  /// Waits until no get() is blocked (the threads left behind have returned from it).
  void wait_unstalled() const {
    while (stalled_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int stalled() const { return stalled_; }
  bool set_epoch_while_stalled() const { return set_epoch_while_stalled_; }

 private:
  uint64_t size_;
  mutable std::set<uint64_t> stalls_;
  bool serial_;
  bool stall_once_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool released_ = false;
  mutable std::atomic<int> stalled_{0};
  bool set_epoch_while_stalled_ = false;
};

std::vector<std::vector<int64_t>> read_all(tp::DataLoader& loader) {
  std::vector<std::vector<int64_t>> batches;
  while (auto batch = loader.next()) {
    if (batch->empty()) {
      batches.emplace_back();
      continue;
    }
    const at::Tensor x = batch->front().second.contiguous();
    batches.emplace_back(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel());
  }
  return batches;
}

tp::LoaderOptions timeout_options(tp::BadSamplePolicy policy) {
  return tp::LoaderOptions().batch_size(4).num_workers(2).shuffle(false).sample_timeout_s(0.5).on_bad_sample(policy);
}

}  // namespace

TEST_CASE("sample_timeout_s with on_bad_sample = fail: next() names the sample and the keys, and nothing waits for it") {
  auto source = std::make_shared<StallingSource>(12, std::set<uint64_t>{5});
  const auto start = std::chrono::steady_clock::now();
  {
    tp::DataLoader loader(source, timeout_options(tp::BadSamplePolicy::kFail));
    loader.start_epoch(0);
    try {
      read_all(loader);
      FAIL("expected a SampleError");
    } catch (const tp::SampleError& e) {
      const std::string what = e.what();
      CHECK(e.index() == 5);
      CHECK(what.find("org.test.stalling (train)") != std::string::npos);
      CHECK(what.find("sample 5 did not load within data.sample_timeout_s = 0.5 s (epoch 1, rank 0, loader thread") !=
            std::string::npos);
      CHECK(what.find("its thread is left behind") != std::string::npos);
      CHECK(what.find("set data.on_bad_sample = \"skip\"") != std::string::npos);
    }
    CHECK(source->stalled() == 1);
  }  // the loader is destroyed while its thread is still blocked: it does not wait for it
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(source->stalled() == 1);
  source->release();
  source->wait_unstalled();
}

TEST_CASE("sample_timeout_s with on_bad_sample = skip: the epoch goes on without the sample; the next waits for it") {
  auto source = std::make_shared<StallingSource>(20, std::set<uint64_t>{6});
  tp::DataLoader loader(source, timeout_options(tp::BadSamplePolicy::kSkip));
  loader.start_epoch(0);
  const std::vector<std::vector<int64_t>> expected{{0, 1, 2, 3}, {4, 5, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}, {16, 17, 18, 19}};
  CHECK(read_all(loader) == expected);
  CHECK(loader.skipped_count() == 1);
  REQUIRE(loader.first_skipped().size() == 1);
  CHECK(loader.first_skipped()[0].index == 6);
  CHECK(loader.first_skipped()[0].message.find("sample 6 did not load within data.sample_timeout_s = 0.5 s") !=
        std::string::npos);
  // Still blocked at the next epoch: set_epoch waits another 0.5 s for it, then the epoch fails.
  try {
    loader.start_epoch(1);
    FAIL("expected a SampleError");
  } catch (const tp::SampleError& e) {
    CHECK(e.index() == 6);
    CHECK(std::string(e.what()).find("still loading after twice that; the next epoch cannot start beside it") !=
          std::string::npos);
  }
  CHECK_FALSE(source->set_epoch_while_stalled());
  source->release();
  source->wait_unstalled();
}

TEST_CASE("sample_timeout_s with on_bad_sample = skip: a thread that returns in time lets the next epoch start") {
  auto source = std::make_shared<StallingSource>(12, std::set<uint64_t>{1}, false, /*stall_once=*/true);
  tp::DataLoader loader(source, timeout_options(tp::BadSamplePolicy::kSkip));
  loader.start_epoch(0);
  std::thread releaser;
  std::vector<std::vector<int64_t>> first;
  while (auto batch = loader.next()) {
    const at::Tensor x = batch->front().second.contiguous();
    first.emplace_back(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel());
    if (first.size() == 1) releaser = std::thread([&] { source->release(); });  // after the skip
  }
  releaser.join();
  CHECK(first == std::vector<std::vector<int64_t>>{{0, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}});
  loader.start_epoch(1);
  CHECK_FALSE(source->set_epoch_while_stalled());
  CHECK(read_all(loader) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}});
  CHECK(loader.skipped_count() == 0);
}

TEST_CASE("sample_timeout_s: a serial source fails even under skip, since the stuck get holds its lock") {
  auto source = std::make_shared<StallingSource>(12, std::set<uint64_t>{2}, /*serial=*/true);
  {
    tp::DataLoader loader(source, timeout_options(tp::BadSamplePolicy::kSkip));
    loader.start_epoch(0);
    try {
      read_all(loader);
      FAIL("expected a SampleError");
    } catch (const tp::SampleError& e) {
      CHECK(e.index() == 2);
      CHECK(std::string(e.what()).find("the source is serial (one get() at a time)") != std::string::npos);
    }
  }
  source->release();
  source->wait_unstalled();
}
