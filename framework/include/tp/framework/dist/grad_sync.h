// Gradient synchronisation for data-parallel training: c10d::Reducer, the engine inside
// Python's DistributedDataParallel. Parameters are grouped into flat buckets (dist.bucket_mb,
// in reverse registration order, as Python does); autograd hooks launch a bucket's all-reduce
// as soon as its last gradient is ready, so communication overlaps the rest of backward, and the
// reducer waits for all buckets at the end of backward. Gradients arrive averaged over ranks.
//
// dist.overlap = false keeps the same buckets but no hooks: after backward, after_backward()
// all-reduces them one after another, as a hand-written loop would (dist-mnist). It exists to
// measure what overlapping buys (bench/ddp); the gradients are the same to rounding.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "tp/framework/plugin/plugin_instance.h"

namespace c10d {
class Reducer;
}  // namespace c10d

namespace tp {

class DistContext;

class GradSync {
 public:
  /// Registers hooks on every trainable parameter of `state` (buffers and frozen parameters are
  /// skipped). Checks that all ranks hold the same parameter shapes (a collective). `dist` must
  /// outlive this object. `overlap` = false (dist.overlap): no hooks; after_backward() reduces.
  GradSync(DistContext& dist, const std::vector<StateTensor>& state, bool overlap = true);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  /// [all ranks] Before the training forward of a micro-batch (`sync` as in before_backward).
  /// On the first call after the first synchronised step the reducer re-orders its buckets by
  /// the order gradients became ready (one broadcast, once per run).
  void before_forward(bool sync);
  /// [all ranks] Before backward of `loss`. `sync` = the window's last micro-batch: backward
  /// all-reduces. Without it the gradients only accumulate locally (no_sync: no communication
  /// on non-final accumulation micro-steps).
  void before_backward(const at::Tensor& loss, bool sync);
  /// [all ranks] After the window's last backward, before the gradients are read. With overlap
  /// off: flattens each bucket, all-reduces it, and writes the average back (a copy in and out
  /// per bucket, none of it hidden behind backward). With overlap on: nothing (the reducer is done).
  void after_backward();
  /// Whether buckets are reduced during backward (dist.overlap).
  bool overlap() const noexcept { return reducer_ != nullptr; }
  /// Number of buckets and their sizes in bytes (for the log line).
  std::vector<int64_t> bucket_bytes() const { return bucket_bytes_; }

 private:
  DistContext& dist_;
  std::unique_ptr<c10d::Reducer> reducer_;       ///< null when overlap is off
  std::vector<at::Tensor> params_;               ///< overlap off: the parameters, registration order
  std::vector<std::vector<size_t>> buckets_;     ///< overlap off: indices into params_, reduction order
  std::vector<int64_t> bucket_bytes_;
};

}  // namespace tp
