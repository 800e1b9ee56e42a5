// The data loader: reads this rank's shard of a SampleSource in sampler order, with a pool of
// worker threads that fetch and collate whole batches ahead of the training loop.
//
// Threads: workers are plain std::threads, one batch per worker at a time. Each calls
// SampleSource::get for the batch's indices and collates them with at::stack on the worker
// thread. LibTorch's intra-op thread count is process-wide, so workers cannot lower it for
// themselves; they do only per-sample work plus one stack per field (memory-bound; on LibTorch
// 2.13 CPU, at::stack of 64 x [3,64,64] on 4 workers with 2 intra-op threads started no OpenMP
// threads), and the trainer sets the intra-op count (ARCH-17: keep loader, OpenMP and
// BLAS threads from oversubscribing the cores). A dataset using OpenCV sets cv threads itself.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tp/framework/config/choices.h" // BadSamplePolicy (data.on_bad_sample)
#include "tp/framework/data/batch_stage.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/data/sampler.h"
#include "tp/framework/error.h"

namespace tp {

/// How the loader shards the dataset across ranks.
enum class LoaderMode {
  /// Every rank reads the same number of samples per epoch: the sampler pads the tail
  /// (SamplerTail::kPad), or drops it when drop_last is set (SamplerTail::kDrop).
  kTrain,
  /// Every sample exactly once over all ranks (SamplerTail::kExact): shards differ by at most one
  /// sample, so ranks may run a different number of batches. Use for evaluation, and reduce
  /// (sum, count) or metric state across ranks once at the end, never per batch.
  kEvalExact,
};

/// A sample dropped under BadSamplePolicy::kSkip.
struct SkippedSample {
  uint64_t index = 0;   ///< dataset index
  std::string message;  ///< the error the sample raised
};

/// `head` followed by one line per sample, "\n  index <i>: <message>": how a warning or an
/// error names skipped samples (training's, evaluation's, predict's).
std::string with_skipped_samples(std::string head, const std::vector<SkippedSample>& samples);

/// Options of DataLoader (fluent setters, validated by the DataLoader constructor).
///
/// Example:
///   auto opts = tp::LoaderOptions().batch_size(64).num_workers(4).seed(cfg.seed)
///                   .rank(rank).world_size(world);
struct LoaderOptions {
  // TORCH_ARG-style: `name(v)` sets and returns *this, `name()` reads.
#define TP_LOADER_ARG(T, name)                  \
  LoaderOptions& name(T value) noexcept {       \
    name##_ = value;                            \
    return *this;                               \
  }                                             \
  T name() const noexcept { return name##_; }   \
  T name##_

  /// Samples per batch, >= 1. The last batch of an epoch may be smaller unless drop_last.
  TP_LOADER_ARG(int64_t, batch_size) = 1;
  /// Worker threads, >= 0. 0 loads each batch inside next() on the calling thread.
  TP_LOADER_ARG(int64_t, num_workers) = 0;
  /// Finished batches kept ahead of the consumer beyond those being built, >= 0: at most
  /// prefetch + num_workers batches are loaded or loading and not yet returned by next(), so at
  /// most (prefetch + num_workers) * batch_size samples are fetched ahead of the consumer.
  /// Ignored when num_workers == 0.
  TP_LOADER_ARG(int64_t, prefetch) = 2;
  /// kTrain: drop the tail of the dataset that does not fill a whole batch on every rank (the
  /// sampler drops n % world_size samples, the loader the last partial batch). Must be false in
  /// kEvalExact.
  TP_LOADER_ARG(bool, drop_last) = false;
  /// Shuffle with the epoch permutation of (seed, epoch); see epoch_permutation().
  TP_LOADER_ARG(bool, shuffle) = true;
  /// Run seed: drives the permutation (equal on all ranks) and every sample's ctx.seed.
  TP_LOADER_ARG(uint64_t, seed) = 0;
  /// This process's rank in [0, world_size).
  TP_LOADER_ARG(int64_t, rank) = 0;
  /// Number of ranks, >= 1.
  TP_LOADER_ARG(int64_t, world_size) = 1;
  /// Sharding mode; see LoaderMode.
  TP_LOADER_ARG(LoaderMode, mode) = LoaderMode::kTrain;
  /// Collate into pinned host memory (for non_blocking copies to a CUDA device). Needs a CUDA
  /// build with a device: the constructor throws tp::Error otherwise.
  TP_LOADER_ARG(bool, pin_memory) = false;
  /// Resume position: the first start_epoch() call skips this many batches of its epoch without
  /// loading them (later epochs start at 0). 0 <= start_batch <= batches_per_epoch().
  TP_LOADER_ARG(int64_t, start_batch) = 0;
  /// A sample that fails to load: fail the epoch (default) or skip it; see BadSamplePolicy.
  TP_LOADER_ARG(BadSamplePolicy, on_bad_sample) = BadSamplePolicy::kFail;
  /// Seconds one SampleSource::get may run on a worker before the loader treats the sample as
  /// bad (`data.sample_timeout_s`; see Timeouts below); 0: no limit. Needs num_workers >= 1: with
  /// 0 the sample loads on the calling thread and nothing watches it.
  TP_LOADER_ARG(double, sample_timeout_s) = 0.0;
  /// For a source stored in groups (SampleSource::sample_groups(), plugin ABI 1.10): the samples
  /// are shuffled within windows of this many consecutive groups (`data.group_window`, >= 1;
  /// SamplerOptions::group_window). Ignored for a source without groups.
  TP_LOADER_ARG(int64_t, group_window) = 4;
#undef TP_LOADER_ARG
};

/// A sample failed to load. The message names the source, the dataset index, the epoch (from 1,
/// as every message of the host counts epochs) and rank
/// and carries the original message; exit_code() is the original tp::Error's, else 1.
class SampleError : public Error {
 public:
  SampleError(const std::string& source_name, uint64_t index, const std::string& message,
              int exit_code = kExitRuntime);
  /// SampleSource::name() of the failing source.
  const std::string& source_name() const noexcept { return source_name_; }
  /// Dataset index of the failing sample.
  uint64_t index() const noexcept { return index_; }
  int exit_code() const noexcept override { return exit_code_; }

 private:
  std::string source_name_;
  uint64_t index_;
  int exit_code_;
};

/// Loads batches of this rank's shard of a SampleSource, in sampler order.
///
/// Order and determinism: batch k of an epoch holds sampler indices [k*B, (k+1)*B) and next()
/// returns batches in increasing k whatever the worker timing (a reorder buffer keyed by k).
/// Each sample's ctx.seed is sample_seed(seed, rank, epoch, index), independent of the worker,
/// so batches are identical for any num_workers. ctx.worker/num_workers name the thread (the
/// calling thread reports worker 0 of 1 when num_workers == 0).
///
/// Threads: all member functions are [main] (one thread). SampleSource::get runs on the workers,
/// serialised by a mutex of this loader when source->serial(). Workers run only between
/// start_epoch() and the end of that epoch (or the next start_epoch(), or destruction), and never
/// during SampleSource::set_epoch.
///
/// Errors: with BadSamplePolicy::kFail (the default), the first exception thrown by a sample (or
/// by collation) stops the other workers and is rethrown by next() as SampleError (or tp::Error
/// for collation), on this and every later next() call of the epoch. Batches before it that were
/// already loaded are dropped. With kSkip, failing samples are left out of their batch and
/// counted (skipped_count()); only collation errors stop the epoch.
///
/// Timeouts (sample_timeout_s > 0, num_workers >= 1): next() checks, while it waits, how long
/// each worker's SampleSource::get has been running. A call past the limit (a read from a hung
/// network file system, a device) cannot be interrupted, so its thread is left behind: it is
/// detached at the end of the epoch and discards whatever it returns, holding only what it
/// shares with its epoch (the source, the options), never the loader. Under kFail next() throws
/// SampleError naming the sample, the limit and the two keys; under kSkip the sample is skipped
/// (reported like a failing one; which samples time out depends on timing, so this skip is not
/// deterministic), a new worker takes the left thread's place and loads its batch again without
/// that sample. A serial source (source->serial()) always fails: the left thread still holds the
/// lock every other get() waits for.
///
/// Example:
///   tp::DataLoader loader(source, tp::LoaderOptions().batch_size(32).num_workers(4));
///   for (uint64_t e = 0; e < epochs; ++e) {
///     loader.start_epoch(e);
///     while (auto batch = loader.next()) step(*batch);
///   }
class DataLoader {
 public:
  /// Validates the options (tp::Error naming the option otherwise); starts no thread. `stage`
  /// (null: none) runs on each collated batch on the worker that built it (batch_stage.h): with
  /// one that wants_encoded(), every sample is asked for its encoded image fields
  /// (ctx.encoded_images, plugin ABI 1.11), which collate as ragged, and the stage's rows that
  /// fail are bad samples under options.on_bad_sample().
  DataLoader(std::shared_ptr<SampleSource> source, LoaderOptions options,
             std::shared_ptr<const BatchStage> stage = nullptr);
  /// Abandons the running epoch: stops and joins the workers and releases every sample and
  /// batch still held. Blocks until in-flight SampleSource::get calls return, except those a
  /// timeout left behind (see Timeouts), which keep their source alive until they do.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Abandons any running epoch (as the destructor does), calls source->set_epoch(epoch), then
  /// starts the workers on this epoch's indices, skipping the first options().start_batch()
  /// batches on the first call and none later.
  void start_epoch(uint64_t epoch);
  /// Same, skipping the first `start_batch` batches (0 <= start_batch <= batches_per_epoch()).
  void start_epoch(uint64_t epoch, int64_t start_batch);

  /// The next batch of the epoch in sampler order (collated; see collate()), or std::nullopt at
  /// the end of the epoch. An empty NamedTensors (no fields) is a batch whose samples were all
  /// skipped (BadSamplePolicy::kSkip); consumers pass it over, but it counts as a batch, so
  /// every epoch yields exactly batches_per_epoch() batches on every rank. Blocks while the batch
  /// is loading. Throws tp::Error before the first
  /// start_epoch(), and SampleError / tp::Error when loading failed (see Errors above).
  std::optional<NamedTensors> next();

  /// Batches per epoch on this rank: ceil(shard / batch_size), or floor with drop_last. In
  /// kEvalExact it may differ by one between ranks. Does not depend on start_batch.
  int64_t batches_per_epoch() const noexcept;
  /// Index in the epoch of the batch the next next() returns: the resume position to checkpoint.
  int64_t next_batch_index() const noexcept { return next_batch_; }
  /// The epoch last started (0 before the first start_epoch()).
  uint64_t epoch() const noexcept { return sampler_.epoch(); }
  /// Seconds the last next() call spent blocked waiting for its batch (the data-wait meter);
  /// with num_workers == 0 that is the whole load and collate time.
  double last_wait_seconds() const noexcept { return last_wait_seconds_; }
  /// The validated options.
  const LoaderOptions& options() const noexcept { return options_; }
  /// The batch stage (null: none).
  const BatchStage* stage() const noexcept { return stage_.get(); }
  /// The source's variable-size fields, which collate() applies to every batch (batch_layout.h):
  /// what batch_size() and batch_rows() need to read this loader's batches.
  const BatchLayout& batch_layout() const { return source_->batch_layout(); }
  /// Samples skipped (BadSamplePolicy::kSkip) in the batches next() has returned
  /// this epoch, in sampler order; reset by start_epoch(). Deterministic for any num_workers.
  int64_t skipped_count() const noexcept { return skipped_count_; }
  /// The first kKeptSkips of those samples, with their messages (for the end-of-epoch report).
  const std::vector<SkippedSample>& first_skipped() const noexcept { return first_skipped_; }
  /// How many skipped samples first_skipped() keeps.
  static constexpr std::size_t kKeptSkips = 5;

 private:
  struct Epoch;        // shared with the workers; defined in data_loader.cpp
  struct LoadedBatch;  // a collated batch (empty when every sample was skipped) and its skips

  struct WorkerSlot;   // one worker thread's sample in flight, for the timeout

  /* Internals */
  void stop_epoch() noexcept;
  // Static: a worker left behind by a timeout may outlive the loader; it reaches only its Epoch.
  static std::optional<LoadedBatch> load_batch(Epoch& ep, int64_t batch, WorkerSlot* slot, uint32_t worker,
                                               uint32_t num_workers);
  static void worker_main(const std::shared_ptr<Epoch>& ep, WorkerSlot& slot);
  /// [main] with ep.mu held: the timeout check of next() (see Timeouts).
  static void leave_stuck_workers(const std::shared_ptr<Epoch>& ep);
  /// [main] Before set_epoch: waits up to sample_timeout_s for the threads earlier epochs left
  /// inside get() to return; SampleError naming the sample when one does not.
  void wait_for_left_threads();
  void note_skips(std::vector<SkippedSample>& skipped);

  std::shared_ptr<SampleSource> source_;
  LoaderOptions options_;
  std::shared_ptr<const BatchStage> stage_;  // null: batches as collated
  BatchLayout collate_layout_;               // the source's, plus the stage's ragged encoded fields
  DistributedSampler sampler_;
  std::shared_ptr<Epoch> epoch_;
  std::vector<std::shared_ptr<Epoch>> left_behind_;  // epochs whose threads a timeout left in get()
  std::shared_ptr<std::timed_mutex> serial_mu_ = std::make_shared<std::timed_mutex>();  // around get() when source_->serial()
  bool started_ = false;
  int64_t next_batch_ = 0;
  double last_wait_seconds_ = 0.0;
  int64_t skipped_count_ = 0;
  std::vector<SkippedSample> first_skipped_;
};

}  // namespace tp
