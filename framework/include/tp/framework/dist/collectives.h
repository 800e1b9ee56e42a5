// The collectives the training roles use (docs/distributed.md, "One collectives object"):
// Lightning's Strategy idea with c10d underneath. A role takes a Collectives& and calls it the
// same way in a single process and under data-parallel training; the single-process
// implementation is the identity (no copy, no device sync), so a role need not branch on whether
// it runs distributed (ARCH-18, which names the two that still do).
//
// Every public call is counted (calls()): a test and report.toml's [collectives] see how many
// collectives one optimizer step costs. The gradient all-reduce inside backward is the
// GradientReducer's and is not counted here (it is bucketed by size, not by call).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/error.h"
#include "tp/framework/plugin/plugin_instance.h"

namespace tp {

class DistContext;

/// The data-parallel gradient all-reduce (GradSync) seen by the step: the single-process
/// reducer does nothing.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  /// [all ranks] Before each training forward; `sync` = the window's last micro-batch.
  virtual void before_forward(bool sync) = 0;
  /// [all ranks] Runs backward of `scaled_loss`; with `sync` (the window's last micro-batch) the
  /// backward all-reduces the gradient buckets. A lost rank surfaces as a tp::Error naming the
  /// ranks that no longer answer.
  virtual void backward(const at::Tensor& scaled_loss, bool sync) = 0;
  /// [all ranks] After the window's last backward, before the gradients are read.
  virtual void after_backward() = 0;
  /// Whether gradients are summed over ranks in backward. Then each window's last backward is a
  /// collective every rank must join (with zero gradients when all its samples were skipped), a
  /// rank cannot leave a window early, and every rank normalises the loss by the same estimate.
  virtual bool sums_over_ranks() const noexcept = 0;
  /// Whether buckets are all-reduced while backward runs (dist.overlap): an out-of-memory error
  /// in that backward cannot be retried in smaller pieces.
  virtual bool overlaps_backward() const noexcept = 0;
  /// One line for the log: ranks, backend and the gradient buckets; "" for a single process.
  virtual std::string describe() const = 0;
};

/// Collectives::all_gather_rows' refusal of rows that do not fit together (thrown on every rank
/// alike), told apart from a collective that failed (tp::Error).
class RowsMismatch : public Error {
 public:
  using Error::Error;
};

/// What agree() returns: the flags ORed over ranks and the sums summed over ranks.
struct Agreement {
  uint32_t flags = 0; ///< some rank raised the bit
  at::Tensor sums;    ///< float64 on the device; the input itself for a single process
};

class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int rank() const noexcept = 0;
  virtual int world_size() const noexcept = 0;
  /// Where collective tensors live (cpu, or cuda:LOCAL_RANK).
  virtual c10::Device device() const noexcept = 0;

  /// [all ranks] Sums each tensor over ranks, in place (one collective per call).
  void all_reduce_sum(std::vector<at::Tensor>& tensors, const char* what);
  /// [all ranks] Rank `root`'s values into every rank's tensors.
  void broadcast(const std::vector<at::Tensor>& tensors, const char* what, int root = 0);
  /// [all ranks] `tensor` of every rank, in rank order (same shape and dtype everywhere).
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const char* what);
  /// [all ranks] Every rank's `rows` [N_r, ...] concatenated along dim 0 in rank order, on
  /// `rows`' device; N_r may differ between ranks (two collectives: the shapes, then the rows
  /// padded to the longest). Throws RowsMismatch on every rank, naming `what` and the shapes, when
  /// the ranks' sizes past dim 0 or dtypes differ. A single process returns `rows` itself.
  /// `row_counts`, when not null, receives every rank's N_r in rank order.
  at::Tensor all_gather_rows(const at::Tensor& rows, const char* what, std::vector<int64_t>* row_counts = nullptr);
  /// [all ranks] ORs `flags` (the low 16 bits) over ranks. Reads the result on the host: a sync
  /// on CUDA under data-parallel training; the identity for a single process.
  uint32_t agree(uint32_t flags, const char* what);
  /// [all ranks] agree() and all_reduce_sum() of `sums` (a float64 vector on device()) fused in
  /// one collective. The single process returns `sums` itself and reads nothing on the host.
  Agreement agree(uint32_t flags, const at::Tensor& sums, const char* what);
  /// [all ranks] One rank's failure becomes every rank's: each passes its own message ("" for
  /// none) and gets "rank R: <message>" of the lowest failing rank, or "" when none failed
  /// (DistContext::first_failure: one all-reduce, a second when a rank failed, the messages
  /// through the rendezvous store).
  std::string first_failure(const std::string& own_failure, const char* what);
  /// [all ranks] The gradient all-reduce over the trainable tensors of `state` (dist.overlap:
  /// `overlap`). Logs nothing; a collective shape check under data-parallel training.
  virtual std::unique_ptr<GradientReducer> gradient_reducer(const std::vector<StateTensor>& state,
                                                            bool overlap) = 0;

  /// [main] A note one rank leaves for the others without a collective, for a decision a rank may
  /// see alone while no collective is due until the end of a long pass (a stop signal during an
  /// evaluation): `raise_notice` leaves it, `notice_raised` says whether any rank did. Through the
  /// rendezvous store (a round trip to rank 0's store, no wait); a single process has no one to
  /// tell (false). Not collectives: not counted in calls(), and never the decision itself, which a
  /// collective still agrees on.
  virtual void raise_notice(const std::string& name) noexcept = 0;
  virtual bool notice_raised(const std::string& name) noexcept = 0;

  /// Collectives made so far (every call above but gradient_reducer).
  int64_t calls() const noexcept { return calls_; }

  /// [main] Enters (+1) or leaves (-1) a scope in which plugins' tp.dist/2 calls are local
  /// (LocalPluginCalls pairs them); a single process has nothing to count.
  virtual void count_local_plugin_scope(int delta) noexcept = 0;
  /// Whether a plugin of this process asked for tp.dist/2 or made one of its calls on the ranks:
  /// its training forwards then hold collectives that every rank must make alike (PLG-22), so one
  /// rank alone may not run a window in more pieces (train.on_oom = "split"). False alone.
  virtual bool plugin_collectives_used() const noexcept = 0;

 protected:
  virtual void do_all_reduce_sum(std::vector<at::Tensor>& tensors, const char* what) = 0;
  virtual void do_broadcast(const std::vector<at::Tensor>& tensors, const char* what, int root) = 0;
  virtual std::vector<at::Tensor> do_all_gather(const at::Tensor& tensor, const char* what) = 0;
  virtual Agreement do_agree(uint32_t flags, const at::Tensor& sums, const char* what) = 0;
  virtual std::string do_first_failure(const std::string& own_failure, const char* what) = 0;

 private:
  int64_t calls_ = 0;
};

/// [main] While it lives, plugins' tp.dist/2 calls (plugin_api/include/tp/host.h) are local, the
/// identity on the caller's tensors: evaluate_split and predict hold one, because their ranks run
/// different numbers of batches (every sample once, unpadded), so no plugin collective could be
/// matched there. Nests.
class LocalPluginCalls {
 public:
  explicit LocalPluginCalls(Collectives& collectives) : collectives_(collectives) {
    collectives_.count_local_plugin_scope(1);
  }
  ~LocalPluginCalls() { collectives_.count_local_plugin_scope(-1); }
  LocalPluginCalls(const LocalPluginCalls&) = delete;
  LocalPluginCalls& operator=(const LocalPluginCalls&) = delete;

 private:
  Collectives& collectives_;
};

/// A single process on `device`: every collective is the identity.
std::unique_ptr<Collectives> single_process_collectives(c10::Device device);
/// The joined job `dist` (which must outlive the result): c10d collectives, GradSync's reducer.
std::unique_ptr<Collectives> data_parallel_collectives(DistContext& dist);
/// `dist` null: single_process_collectives(device); else data_parallel_collectives(*dist).
std::unique_ptr<Collectives> make_collectives(DistContext* dist, c10::Device device);

}  // namespace tp
