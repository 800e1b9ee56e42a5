// torchhost C++ helpers for Tier T plugin authors: Collectives, the "tp.dist/2" service
// (tp/host.h, ABI 1.14) as C++: all_gather with a gradient and all_reduce on the host's process
// group. Every call is a collective in a data-parallel training step (PLG-22: every rank makes
// the same calls in the same order) and the identity for a single process, in evaluations and
// predictions, and in `host plugins check` / `host verify`.
//
// A SimCLR (NT-Xent) loss whose negatives are the global batch:
//
//   class NtXent {
//    public:
//     explicit NtXent(const tp::cpp::ConfigReader&) : dist_(tp::cpp::Collectives::require()) {}
//     tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields&) {
//       const at::Tensor z = at::nn::functional::normalize(outputs.get("embedding"));  // [2B, D]: views a, b
//       int64_t offset = 0;                                                  // where this rank's rows start
//       const at::Tensor all = dist_.all_gather(z, &offset);                 // every rank's rows, rank order
//       ...  // anchors: this rank's rows, at `offset` in `all`; candidates: every row of `all` but
//            // the anchor; the loss: the SUM over this rank's anchors
//     }
//    private:
//     tp::cpp::Collectives dist_;
//   };
//
// plugin_api/README.md, "Collectives for plugins (ABI 1.14)", has the whole loss.
#ifndef TP_CPP_DIST_H
#define TP_CPP_DIST_H

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/host.h"

namespace tp::cpp {

/// all_reduce's reductions (TP_REDUCE_*).
enum class Reduce : int32_t { kSum = TP_REDUCE_SUM, kMean = TP_REDUCE_MEAN, kMax = TP_REDUCE_MAX };

/// The host's "tp.dist/2" table as a value: cheap to copy, valid until the library's deinit().
/// Obtain it in the component's constructor (or create), where the host is known.
class Collectives {
 public:
  /// The service of `host` (default: this library's, plugin_host()); throws Failure
  /// (TP_ERR_UNSUPPORTED, naming the ABI) when the host has none: a host older than 1.14, whose
  /// get_service answers NULL. Use available() to fall back instead.
  static Collectives require(const tp_host_t* host = plugin_host()) {
    const tp_dist_v2_t* table = lookup(host);
    if (table == nullptr)
      throw Failure(TP_ERR_UNSUPPORTED, "this component needs the host service \"tp.dist/2\" (collectives, plugin ABI "
                                        "1.14); this host does not offer it: update torchhost");
    return Collectives(host, table);
  }
  /// Whether `host` offers "tp.dist/2" (false before ABI 1.14).
  static bool available(const tp_host_t* host = plugin_host()) { return lookup(host) != nullptr; }

  /// This process's global rank (0 when not distributed) and the number of ranks (1).
  int rank() const noexcept { return table_->rank; }
  int world_size() const noexcept { return table_->world_size; }
  int local_rank() const noexcept { return table_->local_rank; }
  int local_world_size() const noexcept { return table_->local_world_size; }

  /// [main] Every rank's `rows` ([N_r, ...], 1 to 8 dims) concatenated along dim 0 in rank order,
  /// on `rows`' device. N_r may differ between ranks; the other sizes and the dtype may not (every
  /// rank then throws with both shapes). Differentiable: backward gives `rows` the sum over ranks
  /// of the gradient of its own rows (torch.distributed.nn.functional.all_gather). When the call
  /// is local (tp/host.h: one process, evaluations) the result is `rows` itself. Throws
  /// HostFailure with the host's message on failure.
  ///
  /// `own_offset`, when not null, receives where this rank's rows start in the result (0 when the
  /// call is local): find a local row's partner there by it, never by rank() x N.
  at::Tensor all_gather(const at::Tensor& rows, int64_t* own_offset = nullptr) const {
    tp_tensor out = nullptr;
    const tp_status status = table_->all_gather(host_, borrow_handle(rows), &out, own_offset);
    if (status != TP_OK) throw HostFailure(status, "tp.dist/2 all_gather");
    at::Tensor gathered = unwrap(out);
    host_->tensor_release(host_, out);
    return gathered;
  }

  /// [main] Replaces `tensor` in place by its reduction over ranks (same shape and dtype on every
  /// rank; kMean floating only). No gradient: `tensor` must not require grad (a statistic, such as
  /// DINO's centre, computed under at::NoGradGuard). Throws HostFailure with the host's message.
  void all_reduce(at::Tensor& tensor, Reduce op = Reduce::kSum) const {
    const tp_status status = table_->all_reduce(host_, borrow_handle(tensor), static_cast<int32_t>(op));
    if (status != TP_OK) throw HostFailure(status, "tp.dist/2 all_reduce");
  }

 private:
  Collectives(const tp_host_t* host, const tp_dist_v2_t* table) : host_(host), table_(table) {}

  static const tp_dist_v2_t* lookup(const tp_host_t* host) {
    if (host == nullptr || host->get_service == nullptr) return nullptr;
    const auto* table = static_cast<const tp_dist_v2_t*>(host->get_service(host, TP_SERVICE_DIST_V2));
    // A table too short for both functions is no table (PLG-2: read a table up to its struct_size).
    if (table == nullptr || table->struct_size < sizeof(tp_dist_v2_t) || table->all_reduce == nullptr ||
        table->all_gather == nullptr)
      return nullptr;
    return table;
  }

  const tp_host_t* host_;
  const tp_dist_v2_t* table_;
};

}  // namespace tp::cpp

#endif  // TP_CPP_DIST_H
