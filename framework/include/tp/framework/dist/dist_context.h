// A joined data-parallel job: the rendezvous store, the c10d process group (Gloo on CPU, NCCL on
// CUDA) and this process's device. Created once per process by the session when the launcher
// said WORLD_SIZE > 1, passed by pointer to whoever needs collectives (no global state), and
// never created for a single process. c10d headers stay in the .cpp: this header is cheap.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/dist/rendezvous.h"

namespace c10d {
class ProcessGroup;
class Store;
}  // namespace c10d

namespace tp {

class DistContext {
 public:
  /// Joins the job described by `place` (place.distributed() must be true): rank 0 hosts a
  /// c10d::TCPStore on MASTER_ADDR:MASTER_PORT (or connects to torchrun's agent store), every
  /// rank connects, then the process group is built over it. `run_device` is run.device; under
  /// DDP "auto"/"cuda" mean cuda:LOCAL_RANK. Blocks until all ranks arrive or dist.timeout_s
  /// passes. Throws ConfigError (exit 2) for a bad [dist] table or device, tp::Error for a
  /// rendezvous that fails (port taken, a rank never arrives).
  ///
  /// Example:
  ///   auto dist = DistContext::join(read_rendezvous(env), config.dist, config.run.device);
  ///   Trainer trainer(config, parts, dist->device(), log, run_dir, dist.get());
  static std::unique_ptr<DistContext> join(const Rendezvous& place, const DistSection& options,
                                           const std::string& run_device);
  ~DistContext();
  DistContext(const DistContext&) = delete;
  DistContext& operator=(const DistContext&) = delete;

  int rank() const noexcept { return place_.rank; }
  int world_size() const noexcept { return place_.world_size; }
  const Rendezvous& place() const noexcept { return place_; }
  /// cpu, or cuda:LOCAL_RANK.
  c10::Device device() const noexcept { return device_; }
  /// "gloo" or "nccl".
  const std::string& backend() const noexcept { return backend_; }
  const DistSection& options() const noexcept { return options_; }
  /// The c10d group, for the gradient reducer.
  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const noexcept { return group_; }

  /// Sums each tensor over all ranks, in place, and waits. All tensors on device(); one
  /// collective per tensor (use a small stacked tensor for several scalars). Throws tp::Error
  /// naming the operation and, where it can be found out, the rank that was lost.
  void all_reduce_sum(std::vector<at::Tensor>& tensors, const char* what);
  /// all_reduce_sum with the elementwise maximum instead of the sum (tp.dist/2's TP_REDUCE_MAX).
  void all_reduce_max(std::vector<at::Tensor>& tensors, const char* what);
  /// Copies rank `root`'s values into every rank's tensors (coalesced into flat buffers).
  void broadcast(const std::vector<at::Tensor>& tensors, const char* what, int root = 0);
  /// [all ranks] `tensor` of every rank, in rank order. Same shape and dtype on every rank, on
  /// device(); one collective.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const char* what);
  /// [all ranks] Makes one rank's failure every rank's: each rank passes its own failure message
  /// ("" = none) and gets "rank R: <message>" of the lowest failing rank, or "" when none failed.
  /// Messages travel through the rendezvous store; one all-reduce, and a second when a rank failed
  /// (so that none returns before every rank has read the message). Waits at most dist.timeout_s
  /// for the slowest rank, so a long preparation must fit in it. A store that cannot carry a
  /// message costs the message (the ranks say it could not be read), never the agreement.
  std::string first_failure(const std::string& own_failure, const char* what);
  /// [all ranks] Arrives at the meeting point `name` and returns once every rank has, waiting at
  /// most `timeout` (not dist.timeout_s: for a wait as long as some rank's work, such as a first
  /// dataset preparation). While others are missing it calls `waiting(arrived, seconds)` after
  /// `first_note`, then every `every`. Through a counter in the rendezvous store, polled, so the
  /// process group's collective timeout does not apply. Throws tp::Error naming how many ranks
  /// arrived when the time is up.
  void meet(const std::string& name, std::chrono::milliseconds timeout, std::chrono::milliseconds first_note,
            std::chrono::milliseconds every, const std::function<void(int arrived, double seconds)>& waiting);
  /// [all ranks] Rank 0's `text` on every rank (rank 0 gets its own back): rank 0 leaves it in the
  /// rendezvous store under `name` (once per name and run), the others read it, waiting at most
  /// dist.timeout_s. No collective, so a rank can compare what it resolved (its configuration)
  /// with rank 0's before any collective depends on it. Throws tp::Error when rank 0's text does
  /// not arrive in time.
  std::string rank0_text(const std::string& name, const std::string& text);
  /// [main] Leaves the note `name` in the rendezvous store for the other ranks (no collective; a
  /// round trip to rank 0's store). A store that fails costs the note, never an exception: the
  /// decision it hastens is still agreed in a collective.
  void raise_notice(const std::string& name) noexcept;
  /// [main] Whether any rank left the note `name` (store check, no wait; false when the store
  /// cannot answer).
  bool notice_raised(const std::string& name) noexcept;
  /// Rethrows `error` (from a collective) as a tp::Error that says which collective failed and
  /// which ranks no longer answer (asked through the store, a few seconds at most).
  [[noreturn]] void fail(const char* what, const std::exception& error);
  /// [main] Whether plugins' tp.dist/2 calls are local now (the identity): inside an evaluation
  /// or a prediction (LocalPluginCalls, collectives.h), whose ranks run different numbers of batches.
  bool plugin_calls_local() const noexcept { return local_plugin_scopes_ > 0; }
  /// [main] Enters (+1) or leaves (-1) such a scope; LocalPluginCalls (collectives.h) pairs them.
  void count_local_plugin_scope(int delta) noexcept { local_plugin_scopes_ += delta; }
  /// [any] Notes that a plugin asked for tp.dist/2 or called it on the ranks (HostServices,
  /// plugin/dist_service.cpp); plugin_collectives_used() then stays true for the process.
  void note_plugin_collectives() noexcept { plugin_collectives_used_.store(true, std::memory_order_relaxed); }
  bool plugin_collectives_used() const noexcept { return plugin_collectives_used_.load(std::memory_order_relaxed); }

 private:
  DistContext(Rendezvous place, DistSection options, c10::Device device);

  Rendezvous place_;
  DistSection options_;
  c10::Device device_;
  std::string backend_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int64_t failure_rounds_ = 0; ///< first_failure calls so far: each uses its own store keys
  int64_t meetings_ = 0;       ///< meet calls so far: each counts in its own store key
  int local_plugin_scopes_ = 0; ///< open LocalPluginCalls scopes: plugins' collectives are local
  std::atomic<bool> plugin_collectives_used_{false}; ///< note_plugin_collectives was called
};

/// The failure message a rank left in `store` under `key` (DistContext::first_failure), or, when
/// the store cannot hand it over within its timeout, a sentence that says so: the caller must
/// still reach its next collective, or the other ranks would report this one as lost.
std::string read_failure_message(c10d::Store& store, const std::string& key);

/// Throws ConfigError (exit 2) naming the address when place.master_addr does not resolve (no such
/// host): the store would otherwise retry it for twice dist.timeout_s and then report a socket
/// timeout. A lookup that fails for another reason (DNS unreachable for now) is left to the store.
void check_master_addr_resolves(const Rendezvous& place);

/// [every rank, right after connecting to the rendezvous store] Makes sure `store` belongs to
/// this process's run (place.run_id): rank 0 records its run there, every other rank waits at most
/// `timeout` for that record and compares. Throws tp::Error naming both runs when they differ (a
/// rank that reached another run's store, as two SLURM steps sharing a port do), or saying that
/// no rank 0 recorded a run within `timeout`; a rank therefore never joins a foreign run.
///
/// Example:
///   check_run_identity(*tcp_store, place, std::chrono::seconds(300));
void check_run_identity(c10d::Store& store, const Rendezvous& place, std::chrono::milliseconds timeout);

}  // namespace tp
