#include "tp/framework/data/data_loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/Context.h>

#include "tp/framework/data/collate.h"
#include "tp/framework/exception_text.h"
#include "data/staged_batch.h"

namespace tp {

struct DataLoader::LoadedBatch {
  NamedTensors batch;                 // empty: every sample of the batch was skipped
  std::vector<SkippedSample> skipped; // in sampler order
};

struct DataLoader::WorkerSlot {
  std::atomic<int64_t> started_ns{0};  // steady clock when the get() in flight began; 0: none
  std::atomic<uint64_t> index{0};      // its dataset index
  std::atomic<bool> left{false};       // timed out: the epoch goes on without this thread
  int64_t batch = -1;                  // guarded by Epoch::mu: the batch this thread builds
  uint32_t worker = 0;                 // ctx.worker of its samples
};

// Everything the workers of one epoch share, and all a worker touches: each holds a reference,
// so a thread left behind inside a stuck get() (see Timeouts in data_loader.h) keeps its epoch,
// the source and the options alive after the loader is gone. Created by start_epoch(); released
// by stop_epoch() after the other workers are joined.
struct DataLoader::Epoch {
  std::shared_ptr<SampleSource> source;
  LoaderOptions options;
  std::shared_ptr<const BatchStage> stage;  // null: batches as collated
  BatchLayout collate_layout;               // the loader's (a copy: a thread left behind outlives it)
  std::shared_ptr<std::timed_mutex> serial_mu;  // the loader's, held around get() when source->serial()
  uint64_t epoch = 0;
  std::vector<uint64_t> indices;  // this rank's shard, in sampler order
  int64_t end_batch = 0;          // batches_per_epoch()
  int64_t window = 1;             // prefetch + num_workers: batches claimed and not yet returned

  std::mutex mu;
  std::condition_variable work_cv;   // workers: the window moved, or stop
  std::condition_variable ready_cv;  // next(): a batch finished, or an error
  int64_t next_claim = 0;            // guarded by mu
  int64_t next_return = 0;           // guarded by mu
  std::map<int64_t, LoadedBatch> ready;   // reorder buffer, guarded by mu; <= window entries
  std::exception_ptr error;               // guarded by mu; first failure wins
  std::atomic<bool> stop{false};          // written under mu, polled between samples without it
  std::deque<WorkerSlot> slots;           // one per thread of `workers`, same order; grows under mu
  std::vector<std::thread> workers;       // grows under mu (a thread replacing one left behind)
  std::map<uint64_t, std::string> timed_out;  // kSkip: samples left behind, and why; under mu
  std::vector<int64_t> reload;            // batches of threads left behind, to load again; under mu
};

namespace {

SamplerOptions sampler_options(const SampleSource* source, const LoaderOptions& o) {
  TP_CHECK(source != nullptr, "DataLoader: source is null");
  TP_CHECK(o.batch_size() >= 1, "DataLoader: batch_size must be >= 1, got ", o.batch_size());
  TP_CHECK(o.num_workers() >= 0 && o.num_workers() <= 1024,
           "DataLoader: num_workers must be in [0, 1024], got ", o.num_workers());
  TP_CHECK(o.prefetch() >= 0, "DataLoader: prefetch must be >= 0, got ", o.prefetch());
  TP_CHECK(o.start_batch() >= 0, "DataLoader: start_batch must be >= 0, got ", o.start_batch());
  TP_CHECK(o.group_window() >= 1, "DataLoader: group_window must be >= 1, got ", o.group_window());
  TP_CHECK(!(o.mode() == LoaderMode::kEvalExact && o.drop_last()),
           "DataLoader (", source->name(), "): drop_last contradicts eval_exact mode, which reads "
           "every sample exactly once; set drop_last = false for evaluation");
  // Pinned allocation fails deep inside a worker otherwise; say it here, once.
  TP_CHECK(!o.pin_memory() || at::hasCUDA(), "DataLoader (", source->name(),
           "): pin_memory = true needs a CUDA build of LibTorch and a visible GPU; set it to "
           "false when training on CPU");
  SamplerTail tail = SamplerTail::kPad;
  if (o.mode() == LoaderMode::kEvalExact) {
    tail = SamplerTail::kExact;
  } else if (o.drop_last()) {
    tail = SamplerTail::kDrop;
  }
  return SamplerOptions(source->size())
      .rank(o.rank())
      .world_size(o.world_size())
      .shuffle(o.shuffle())
      .seed(o.seed())
      .tail(tail)
      .group_window(static_cast<uint64_t>(o.group_window()))
      // Exact evaluation deals whole batches (sampler.h): N ranks read one process's batches.
      .block(o.mode() == LoaderMode::kEvalExact ? static_cast<uint64_t>(o.batch_size()) : 1)
      .group_ends(source->sample_groups());
}

std::string describe_exception(const std::exception_ptr& e, int* exit_code) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    *exit_code = err.exit_code();
    return err.what();
  } catch (...) {
    return exception_text(e);  // the C++ backtrace of a worker thread says nothing
  }
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<SampleSource> source, LoaderOptions options,
                       std::shared_ptr<const BatchStage> stage)
    : source_(std::move(source)),
      options_(options),
      stage_(std::move(stage)),
      collate_layout_(with_ragged(source_ ? source_->batch_layout() : BatchLayout(),
                                  stage_ ? stage_->ragged_fields() : std::vector<std::string>())),
      sampler_(sampler_options(source_.get(), options_)) {
  TP_CHECK(options_.start_batch() <= batches_per_epoch(), "DataLoader (", source_->name(),
           "): start_batch ", options_.start_batch(), " is past the end of the epoch (",
           batches_per_epoch(), " batches)");
}

DataLoader::~DataLoader() { stop_epoch(); }

int64_t DataLoader::batches_per_epoch() const noexcept {
  const auto n = static_cast<int64_t>(sampler_.size());
  const int64_t b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(uint64_t epoch) {
  start_epoch(epoch, started_ ? 0 : options_.start_batch());
}

void DataLoader::start_epoch(uint64_t epoch, int64_t start_batch) {
  stop_epoch();
  started_ = true;
  TP_CHECK(start_batch >= 0 && start_batch <= batches_per_epoch(), "DataLoader (",
           source_->name(), "): start_batch ", start_batch, " is outside [0, ",
           batches_per_epoch(), "]");
  // No worker runs here: stop_epoch() joined them, as set_epoch's contract requires; a thread
  // an earlier epoch left inside get() is waited for (or reported) first.
  wait_for_left_threads();
  source_->set_epoch(epoch);
  sampler_.set_epoch(epoch);

  auto ep = std::make_shared<Epoch>();
  ep->source = source_;
  ep->options = options_;
  ep->stage = stage_;
  ep->collate_layout = collate_layout_;
  ep->serial_mu = serial_mu_;
  ep->epoch = epoch;
  ep->indices = sampler_.indices();
  ep->end_batch = batches_per_epoch();
  ep->window = options_.prefetch() + options_.num_workers();
  // Skipped batches are never claimed, so their samples are never fetched.
  ep->next_claim = ep->next_return = start_batch;
  next_batch_ = start_batch;
  last_wait_seconds_ = 0.0;
  skipped_count_ = 0;
  first_skipped_.clear();
  epoch_ = std::move(ep);

  const auto workers = static_cast<uint32_t>(options_.num_workers());
  try {
    std::lock_guard<std::mutex> lock(epoch_->mu);  // the threads read `slots` as they start
    for (uint32_t w = 0; w < workers; ++w) {
      WorkerSlot& slot = epoch_->slots.emplace_back();
      slot.worker = w;
      epoch_->workers.emplace_back([ep = epoch_, &slot] { worker_main(ep, slot); });
    }
  } catch (...) {
    stop_epoch();  // thread creation failed: join the ones that started
    throw;
  }
}

void DataLoader::stop_epoch() noexcept {
  if (!epoch_) return;
  {
    std::lock_guard<std::mutex> lock(epoch_->mu);
    epoch_->stop = true;
  }
  epoch_->work_cv.notify_all();
  // Waits for in-flight get() calls; a worker checks `stop` between samples, so this takes at
  // most one sample's load time. A thread left behind by the timeout is not waited for: it holds
  // its own reference to the epoch and ends whenever its get() returns.
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(epoch_->mu);
    workers.swap(epoch_->workers);
  }
  bool left = false;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (!workers[i].joinable()) continue;
    if (epoch_->slots[i].left.load()) {
      workers[i].detach();
      left = true;
    } else {
      workers[i].join();
    }
  }
  if (left) {
    // Kept to be waited for before the next set_epoch; its batches are released now.
    std::lock_guard<std::mutex> lock(epoch_->mu);
    epoch_->ready.clear();
    left_behind_.push_back(epoch_);
  }
  // Releasing the epoch drops the reorder buffer: every sample and batch is released here.
  epoch_.reset();
}

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<DataLoader::LoadedBatch> DataLoader::load_batch(Epoch& ep, int64_t batch, WorkerSlot* slot,
                                                              uint32_t worker, uint32_t num_workers) {
  const LoaderOptions& options = ep.options;
  SampleSource& source = *ep.source;
  const auto b = static_cast<std::size_t>(options.batch_size());
  const std::size_t begin = static_cast<std::size_t>(batch) * b;
  const std::size_t end = std::min(begin + b, ep.indices.size());
  const std::span<const uint64_t> indices(ep.indices.data() + begin, end - begin);

  tp_worker_ctx_t ctx{};
  ctx.struct_size = sizeof(tp_worker_ctx_t);
  ctx.worker = worker;
  ctx.num_workers = num_workers;
  ctx.rank = static_cast<int32_t>(options.rank());
  ctx.epoch = ep.epoch;
  ctx.encoded_images = ep.stage != nullptr && ep.stage->wants_encoded() ? 1U : 0U;

  std::vector<NamedTensors> samples;
  samples.reserve(indices.size());
  std::vector<uint64_t> kept;  // dataset indices of `samples`, for collate's messages
  kept.reserve(indices.size());
  LoadedBatch out;
  const bool serial = source.serial();
  const bool skip = options.on_bad_sample() == BadSamplePolicy::kSkip;
  for (const uint64_t index : indices) {
    if (ep.stop.load(std::memory_order_relaxed)) return std::nullopt;  // epoch abandoned
    if (slot != nullptr && slot->left.load()) return std::nullopt;     // timed out: replaced
    // A sample that timed out is skipped where its batch is loaded again.
    if (skip && slot != nullptr && options.sample_timeout_s() > 0.0) {
      std::lock_guard<std::mutex> lock(ep.mu);
      if (const auto it = ep.timed_out.find(index); it != ep.timed_out.end()) {
        out.skipped.push_back({index, it->second});
        continue;
      }
    }
    ctx.seed = sample_seed(options.seed(), options.rank(), ep.epoch, index);
    try {
      std::unique_lock<std::timed_mutex> lock(*ep.serial_mu, std::defer_lock);
      // Timed: a thread left behind inside get() may hold the lock forever, and the epoch's stop
      // must still end this wait.
      while (serial && !lock.try_lock_for(std::chrono::milliseconds(50)))
        if (ep.stop.load(std::memory_order_relaxed)) return std::nullopt;
      if (slot != nullptr) {  // after the lock: waiting for another thread's sample is not this one's time
        slot->index.store(index);
        slot->started_ns.store(steady_ns());
      }
      samples.push_back(source.get(index, ctx));
      if (slot != nullptr) slot->started_ns.store(0);
      kept.push_back(index);
    } catch (...) {
      if (slot != nullptr) slot->started_ns.store(0);
      int code = kExitRuntime;
      const std::string original = describe_exception(std::current_exception(), &code);
      if (skip) {
        out.skipped.push_back({index, original});
        continue;
      }
      throw SampleError(source.name(), index,
                        detail::concat("data loader: source '", source.name(),
                                       "' failed on sample ", index, " (epoch ", ep.epoch + 1,
                                       ", rank ", options.rank(), "): ", original,
                                       " (set data.on_bad_sample = \"skip\" to drop failing samples "
                                       "and count them instead)"),
                        code);
    }
  }
  // Every sample skipped: an empty batch, not a missing one, so the consumer still sees
  // batches_per_epoch() batches and its accumulation windows (and, data-parallel, every rank's
  // step count) stay aligned with the epoch.
  if (samples.empty()) return out;
  if (slot != nullptr && slot->left.load()) return std::nullopt;  // replaced while its last sample loaded
  try {
    out.batch = collate(std::move(samples), CollateOptions{kept, options.pin_memory(), &ep.collate_layout});
  } catch (const std::exception& e) {
    throw Error(detail::concat("data loader: source '", source.name(), "', epoch ", ep.epoch + 1,
                               ", batch ", batch, ": ", e.what()));
  }
  if (ep.stage != nullptr) {
    ctx.encoded_images = 0;  // a refetch asks for the pixels
    out.batch = run_stage(*ep.stage, std::move(out.batch), StageContext{source, options, ctx, kept},
                          out.skipped);
  }
  return out;
}

void DataLoader::worker_main(const std::shared_ptr<Epoch>& shared, WorkerSlot& slot) {
  Epoch& ep = *shared;
  const auto num_workers = static_cast<uint32_t>(ep.options.num_workers());
  for (;;) {
    int64_t batch = 0;
    {
      std::unique_lock<std::mutex> lock(ep.mu);
      // Claims are in batch order and bounded by the window, so the batch next() waits for is
      // always claimed or claimable: no deadlock however slow a single sample is. A batch whose
      // thread was left behind comes first: next() may be waiting for it.
      ep.work_cv.wait(lock, [&] {
        return ep.stop || !ep.reload.empty() || ep.next_claim >= ep.end_batch ||
               ep.next_claim < ep.next_return + ep.window;
      });
      if (ep.stop) return;
      if (!ep.reload.empty()) {
        batch = ep.reload.back();
        ep.reload.pop_back();
      } else {
        if (ep.next_claim >= ep.end_batch) return;
        batch = ep.next_claim++;
      }
      slot.batch = batch;
    }
    // The last batch is claimed: let idle workers see it and exit now rather than at join.
    if (batch + 1 == ep.end_batch) ep.work_cv.notify_all();
    std::optional<LoadedBatch> result;
    try {
      result = load_batch(ep, batch, &slot, slot.worker, num_workers);
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(ep.mu);
        if (slot.left) return;  // replaced: its batch is being loaded again
        if (!ep.error) ep.error = std::current_exception();
        ep.stop = true;
      }
      ep.work_cv.notify_all();
      ep.ready_cv.notify_all();
      return;
    }
    if (!result) return;  // abandoned or replaced mid-batch; the samples were released by unwinding
    {
      std::lock_guard<std::mutex> lock(ep.mu);
      if (ep.stop || slot.left) return;  // abandoned or replaced: `result` is released outside the lock
      ep.ready.emplace(batch, std::move(*result));
    }
    ep.ready_cv.notify_one();
  }
}

void DataLoader::leave_stuck_workers(const std::shared_ptr<Epoch>& shared) {
  Epoch& ep = *shared;
  const double limit = ep.options.sample_timeout_s();
  const int64_t now = steady_ns();
  const auto limit_ns = static_cast<int64_t>(limit * 1e9);
  const std::size_t threads = ep.slots.size();  // replacements started below are not checked now
  for (std::size_t i = 0; i < threads; ++i) {
    WorkerSlot& slot = ep.slots[i];
    const int64_t started = slot.started_ns.load();
    if (slot.left || started == 0 || now - started < limit_ns) continue;
    const uint64_t index = slot.index.load();
    const std::string name = ep.source->name();
    const std::string what = detail::concat("sample ", index, " did not load within data.sample_timeout_s = ", limit,
                                            " s (epoch ", ep.epoch + 1, ", rank ", ep.options.rank(), ", loader thread ",
                                            slot.worker, "); its read may be stuck (a hung network file system, a "
                                            "device, a FIFO), and its thread is left behind");
    slot.left = true;
    if (ep.options.on_bad_sample() == BadSamplePolicy::kFail || ep.source->serial()) {
      const char* fix = ep.source->serial()
                            ? "; the source is serial (one get() at a time), so no other sample can load past it. "
                              "Raise data.sample_timeout_s if samples are really this slow, or fix the storage"
                            : ". Raise data.sample_timeout_s if samples are really this slow, or set "
                              "data.on_bad_sample = \"skip\" to go on without it";
      if (!ep.error)
        ep.error = std::make_exception_ptr(
            SampleError(name, index, detail::concat("data loader: source '", name, "': ", what, fix)));
      ep.stop = true;
      ep.work_cv.notify_all();
      return;
    }
    ep.timed_out.emplace(index, what);
    ep.reload.push_back(slot.batch);
    WorkerSlot& replacement = ep.slots.emplace_back();
    replacement.worker = slot.worker;
    ep.workers.emplace_back([shared, &replacement] { worker_main(shared, replacement); });
  }
}

void DataLoader::wait_for_left_threads() {
  if (left_behind_.empty()) return;
  // set_epoch never runs beside a get() (Threads, data_loader.h): give a thread left inside one another
  // sample_timeout_s to return, then say what blocks the epoch.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.sample_timeout_s());
  for (const std::shared_ptr<Epoch>& ep : left_behind_) {
    for (const WorkerSlot& slot : ep->slots) {
      if (!slot.left) continue;
      while (slot.started_ns.load() != 0) {
        if (std::chrono::steady_clock::now() > deadline)
          throw SampleError(source_->name(), slot.index.load(),
                            detail::concat("data loader: source '", source_->name(), "': sample ", slot.index.load(),
                                           " of epoch ", ep->epoch, ", left behind after data.sample_timeout_s = ",
                                           options_.sample_timeout_s(), " s, is still loading after twice that; ",
                                           "the next epoch cannot start beside it (the source's set_epoch must not "
                                           "run during a get). Fix the storage it reads, or raise "
                                           "data.sample_timeout_s"));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  left_behind_.clear();
}

void DataLoader::note_skips(std::vector<SkippedSample>& skipped) {
  skipped_count_ += static_cast<int64_t>(skipped.size());
  for (auto& sample : skipped) {
    if (first_skipped_.size() >= kKeptSkips) break;
    first_skipped_.push_back(std::move(sample));
  }
}

std::optional<NamedTensors> DataLoader::next() {
  TP_CHECK(epoch_ != nullptr, "DataLoader (", source_->name(),
           "): next() called before start_epoch()");
  Epoch& ep = *epoch_;
  const auto t0 = std::chrono::steady_clock::now();
  const auto finish_wait = [&] {
    last_wait_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };

  if (options_.num_workers() == 0) {
    if (ep.error) std::rethrow_exception(ep.error);
    std::optional<LoadedBatch> loaded;
    if (ep.next_return < ep.end_batch) {
      try {
        loaded = load_batch(ep, ep.next_return, nullptr, 0, 1);
      } catch (...) {
        ep.error = std::current_exception();  // sticky, as with workers
        finish_wait();
        throw;
      }
      next_batch_ = ++ep.next_return;
    }
    finish_wait();
    // nullopt from load_batch only when the epoch was abandoned, which cannot happen here.
    if (!loaded) return std::nullopt;
    note_skips(loaded->skipped);
    return std::move(loaded->batch);
  }

  std::unique_lock<std::mutex> lock(ep.mu);
  if (!ep.error && ep.next_return >= ep.end_batch) {
    finish_wait();
    return std::nullopt;
  }
  const auto arrived = [&] { return ep.error || ep.ready.count(ep.next_return) != 0; };
  if (options_.sample_timeout_s() > 0.0) {
    // Wake up a few times per limit (at most once a second) to look for a sample past it.
    const double poll = std::clamp(options_.sample_timeout_s() / 4.0, 0.01, 1.0);
    while (!arrived()) {
      ep.ready_cv.wait_for(lock, std::chrono::duration<double>(poll), arrived);
      if (!arrived()) leave_stuck_workers(epoch_);
    }
  } else {
    ep.ready_cv.wait(lock, arrived);
  }
  if (ep.error) {
    finish_wait();
    std::rethrow_exception(ep.error);
  }
  auto node = ep.ready.extract(ep.next_return);
  next_batch_ = ++ep.next_return;
  ep.work_cv.notify_one();  // the window moved by one batch: exactly one more can be claimed
  lock.unlock();
  note_skips(node.mapped().skipped);
  finish_wait();
  return std::move(node.mapped().batch);
}

}  // namespace tp
