// torchhost C++ helpers for Tier T metric authors: GatheredRows, metric state that is concatenated
// across ranks instead of summed (plugin ABI 1.7, tp_metric_v1_t.visit_gathered_state).
//
// A metric that ranks values over the whole split (COCO mAP sorts every detection by its score)
// cannot keep sums: it keeps rows. update() appends a batch's rows on the device (no copy of the
// rows so far, no sync); the rows are concatenated once, when the host visits them before
// compute(), and a distributed evaluation then replaces them by every rank's rows in rank order.
//
//   class Detections {
//    public:
//     std::vector<tp::cpp::StateSlot> state() { return {}; }
//     std::vector<tp::cpp::GatheredSlot> gathered_state() { return {{"scores", &scores_}}; }
//     void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields&) { scores_.append(outputs.get("scores").reshape({-1, 1}), "scores"); }
//     std::vector<tp_scalar_t> compute() { const at::Tensor all = scores_.rows().cpu(); ... }
//    private:
//     tp::cpp::GatheredRows scores_{{1}, at::kDouble};
//   };
#ifndef TP_CPP_GATHERED_ROWS_H
#define TP_CPP_GATHERED_ROWS_H

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/guard.h"

namespace tp::cpp {

/// Rows of one shape and dtype, appended batch by batch: this rank's part of a state the host
/// concatenates across ranks (ABI 1.7). Lives on one device; starts empty ([0, row_shape...]).
class GatheredRows {
 public:
  /// Rows of shape `row_shape` (the sizes past dim 0) and `dtype`, on the CPU until to().
  GatheredRows(std::vector<int64_t> row_shape, at::ScalarType dtype)
      : row_shape_(std::move(row_shape)), dtype_(dtype) {
    clear();
  }

  /// [main] Appends `rows` [n, row_shape...] (n may be 0), converted to the dtype and moved to
  /// the device: a device op, never a sync. Throws Failure(TP_ERR_INVALID_ARGUMENT) for another
  /// row shape, naming `what`.
  void append(const at::Tensor& rows, const std::string& what) {
    if (rows.dim() != static_cast<int64_t>(row_shape_.size()) + 1 || rows.sizes().slice(1) != at::IntArrayRef(row_shape_))
      throw Failure(TP_ERR_INVALID_ARGUMENT, what + ": rows of shape [N" + shape_tail() + "] expected, got " +
                                                 c10::str(rows.sizes()));
    pending_.push_back(rows.to(all_.device(), dtype_));
  }

  /// [main] Every row so far, [N, row_shape...]: the appended batches concatenated (once; the
  /// result is kept). After the host's gather, every rank's rows.
  const at::Tensor& rows() {
    if (!pending_.empty()) {
      pending_.insert(pending_.begin(), all_);
      all_ = at::cat(pending_);
      pending_.clear();
    }
    return all_;
  }

  /// [main] Drops every row (0 rows), keeping the device.
  void clear() {
    const at::Device device = all_.defined() ? all_.device() : at::Device(at::kCPU);
    std::vector<int64_t> empty{0};
    empty.insert(empty.end(), row_shape_.begin(), row_shape_.end());
    all_ = at::empty(empty, at::TensorOptions().dtype(dtype_).device(device));
    pending_.clear();
  }

  /// [main] Moves the rows to `device`.
  void to(const at::Device& device) {
    all_ = rows().to(device);
  }

 private:
  std::string shape_tail() const {
    std::string out;
    for (const int64_t size : row_shape_) out += ", " + std::to_string(size);
    return out;
  }

  std::vector<int64_t> row_shape_;
  at::ScalarType dtype_;
  at::Tensor all_;                    // the rows concatenated so far; what visit_gathered_state lends
  std::vector<at::Tensor> pending_;   // appended since, concatenated by rows()
};

/// One gathered state of a metric: its name (static storage) and the rows. The member's address
/// must stay valid as long as the metric.
struct GatheredSlot {
  const char* name;
  GatheredRows* rows;
};

}  // namespace tp::cpp

#endif  // TP_CPP_GATHERED_ROWS_H
