// Test support for the data tests: in-memory SampleSources that record what the loader does to
// them (fetch counts, concurrency, live sample buffers), a deadlock guard and a thread counter.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "tp/framework/data/sample_source.h"
#include "tp/framework/data/sampler.h"

namespace tp::test {

/// Everything a source observed. Counters are atomics: get() runs on worker threads.
struct Probe {
  std::atomic<int64_t> live{0};          // sample buffers not yet released
  std::array<std::atomic<int64_t>, 8> live_in_epoch{};  // the same, by epoch (< 8)
  std::atomic<int64_t> fetched{0};       // get() calls started
  std::atomic<int64_t> consumed{0};      // set by the test: samples of batches asked for so far
  std::atomic<int64_t> max_ahead{0};     // max(fetched - consumed) seen inside get()
  std::atomic<int64_t> in_get{0};        // get() calls running now
  std::atomic<int64_t> max_in_get{0};    // max concurrency seen
  std::atomic<int64_t> last_set_epoch{-1};
  std::atomic<int64_t> get_during_set_epoch{0};
  std::mutex mu;
  std::multiset<uint64_t> fetched_indices;  // guarded by mu
};

inline void atomic_max(std::atomic<int64_t>& target, int64_t value) {
  int64_t cur = target.load();
  while (value > cur && !target.compare_exchange_weak(cur, value)) {
  }
}

/// Fields per sample: "x" int64 scalar = index, "seed" int64 scalar = bits of ctx.seed,
/// "y" float [2] = {index / 2, epoch}, "worker" int64 scalar = ctx.worker. All share one heap
/// buffer freed when the last of them dies (what a DLPack deleter does), tracked by probe.live.
/// Options: jitter sleeps 0-2 ms chosen by the index, throw_at throws on one index,
/// serial() as given.
class MemorySource : public SampleSource {
 public:
  /// Fluent options: MemorySource::Options().size(40).jitter(true).throw_at(17).
  struct Options {
#define TP_TEST_OPT(T, name, init)      \
  Options& name(T v) {                  \
    name##_ = v;                        \
    return *this;                       \
  }                                     \
  T name##_ = init
    TP_TEST_OPT(uint64_t, size, 10);
    TP_TEST_OPT(bool, serial, false);
    TP_TEST_OPT(bool, jitter, false);            // sleep 0-2 ms chosen by the index
    TP_TEST_OPT(std::optional<uint64_t>, throw_at, std::nullopt);
    TP_TEST_OPT(std::optional<uint64_t>, throw_in_epoch, std::nullopt);  // unset: every epoch
    TP_TEST_OPT(int, sleep_us, 0);               // fixed sleep per get(), to provoke overlap
#undef TP_TEST_OPT
  };
  explicit MemorySource(Options o, std::shared_ptr<Probe> probe = std::make_shared<Probe>())
      : o_(o), probe_(std::move(probe)) {}

  uint64_t size() const override { return o_.size_; }
  bool serial() const override { return o_.serial_; }
  std::string name() const override { return "test.memory (train)"; }
  void set_epoch(uint64_t epoch) override {
    if (probe_->in_get.load() != 0) probe_->get_during_set_epoch++;
    epoch_ = epoch;
    probe_->last_set_epoch = static_cast<int64_t>(epoch);
  }

  NamedTensors get(uint64_t index, const tp_worker_ctx_t& ctx) const override {
    atomic_max(probe_->max_in_get, ++probe_->in_get);
    const int64_t fetched = ++probe_->fetched;
    atomic_max(probe_->max_ahead, fetched - probe_->consumed.load());
    {
      std::lock_guard<std::mutex> lock(probe_->mu);
      probe_->fetched_indices.insert(index);
    }
    struct InGet {
      Probe* p;
      ~InGet() { --p->in_get; }
    } in_get{probe_.get()};
    if (o_.jitter_) std::this_thread::sleep_for(std::chrono::microseconds(mix_seed(index) % 2000));
    if (o_.sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(o_.sleep_us_));
    if (o_.throw_at_ && *o_.throw_at_ == index &&
        (!o_.throw_in_epoch_ || *o_.throw_in_epoch_ == ctx.epoch)) {
      throw std::runtime_error("decode failed: corrupt record");
    }
    struct Buffer {
      int64_t x, seed, worker;
      float y[2];
      Probe* probe;
      uint64_t epoch;
      ~Buffer() {
        --probe->live;
        --probe->live_in_epoch[epoch % 8];
      }
    };
    auto buf = std::make_shared<Buffer>();
    ++probe_->live;
    ++probe_->live_in_epoch[epoch_ % 8];
    buf->probe = probe_.get();
    buf->epoch = epoch_;
    buf->x = static_cast<int64_t>(index);
    std::memcpy(&buf->seed, &ctx.seed, sizeof(int64_t));
    buf->worker = ctx.worker;
    buf->y[0] = static_cast<float>(index) / 2.0F;
    buf->y[1] = static_cast<float>(epoch_);
    const auto keep = [buf](void*) {};  // the deleter owns a reference to the buffer
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    return {{"x", at::from_blob(&buf->x, {}, keep, i64)},
            {"seed", at::from_blob(&buf->seed, {}, keep, i64)},
            {"y", at::from_blob(buf->y, {2}, keep, at::TensorOptions().dtype(at::kFloat))},
            {"worker", at::from_blob(&buf->worker, {}, keep, i64)}};
  }

  Probe& probe() const { return *probe_; }

 private:
  Options o_;
  std::shared_ptr<Probe> probe_;
  uint64_t epoch_ = 0;
};

/// Kills the process (exit 3) if not destroyed within `seconds`: turns a deadlock into a
/// failure instead of a hung ctest. The only timing in these tests, and a generous one.
class DeadlockGuard {
 public:
  explicit DeadlockGuard(int seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "DEADLOCK GUARD: '%s' did not finish in %d s\n", what_.c_str(),
                     seconds);
        std::_Exit(3);
      }
    });
  }
  ~DeadlockGuard() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// Threads of this process now (Linux: entries of /proc/self/task).
inline int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

}  // namespace tp::test
