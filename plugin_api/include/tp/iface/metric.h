/* torchhost plugin ABI, Tier T: metrics ("tp.metric/1").
 *
 * A metric accumulates state tensors on the device where the predictions live (no `.item()` per
 * batch, PLG-11) and computes its values from the accumulated state, never as a mean
 * of per-batch values. A state tensor combines across ranks in one of two ways, so that a 2-rank
 * evaluation equals the 1-rank evaluation exactly:
 *   - by elementwise SUM (counts, sums, confusion matrices: visit_state); the host all-reduces;
 *   - by concatenation of rows (@since 1.7, visit_gathered_state): values that do not add up, such
 *     as the scored detections a COCO mAP ranks over the whole split. The host all-gathers them.
 * Both happen before compute().
 *
 * Lifecycle: create -> to_device -> (reset, update..., [all-reduce], compute)... -> destroy. */
#ifndef TP_IFACE_METRIC_H
#define TP_IFACE_METRIC_H

#include <stdint.h>

#include "tp/config.h"
#include "tp/host.h"
#include "tp/iface/callback.h"
#include "tp/iface/tensor.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

#define TP_IFACE_METRIC_V1 "tp.metric/1"

/** The room a host gives compute(): at least this many values. Hosts built before this constant
 *  existed gave 64 under the same ABI 1.13, so a metric reporting more fails on them at its first
 *  compute() (capacity too small) rather than at load; the next ABI minor makes it a load-time
 *  refusal (version.h). */
#define TP_METRIC_VALUE_CAPACITY 8192u

typedef struct tp_metric_v1_t {
  uint32_t struct_size; /* = sizeof(tp_metric_v1_t) */
  /** [main] `host` borrowed until deinit(); `cfg` only during the call. */
  tp_status (*create)(const tp_host_t *host, const tp_config_t *cfg, void **out_self);
  /** [main] Accepts NULL. */
  void (*destroy)(void *self);
  /** [main] Moves the state to the device (TP_DEVICE_*, index). Resets nothing. */
  tp_status (*to_device)(void *self, int32_t device_type, int32_t device_index);
  /** [main] Zeroes the state. */
  tp_status (*reset)(void *self);
  /** [main] Adds one batch. Outputs and targets borrowed for the call, on the metric's device.
   *  Runs under no-grad; never synchronizes the device. */
  tp_status (*update)(void *self, const tp_named_tensor_t *outputs, uint32_t output_count,
                      const tp_named_tensor_t *targets, uint32_t target_count);
  /** [main] Visits every state tensor (is_buffer = true). Each handle is borrowed for the visitor
   *  call only (tp_state_visitor); the tensor it points at is the metric's own state, kept until
   *  destroy() or to_device(), so the host sums copies of it (sharing storage) across ranks in
   *  place. Same order every time. */
  tp_status (*visit_state)(void *self, tp_state_visitor visit, void *user);
  /** [main] Writes up to `capacity` values (names in static storage, e.g. "accuracy") and their
   *  number; `capacity` >= TP_METRIC_VALUE_CAPACITY (above). May synchronize the device
   *  (called once per evaluation). */
  tp_status (*compute)(void *self, tp_scalar_t *out_values, uint32_t capacity,
                       uint32_t *out_count);
  /** [main] @since 1.7, optional (NULL: every state tensor sums). Visits the state tensors whose
   *  ranks' values are concatenated instead of summed: each is this rank's rows [N, ...] (N may be
   *  0; the sizes past dim 0 and the dtype the same on every rank). Handles as visit_state's. Under
   *  a distributed evaluation the host gathers every rank's rows and, before compute(), makes each
   *  visited tensor (in place, through the handle's TensorImpl: at::Tensor::set_) the rows of rank
   *  0, then rank 1, ...; a single process leaves them as they are. Rows are in rank order, not in
   *  the dataset's: a metric that needs an order sorts by a key it stored in the rows. reset() must
   *  empty them (0 rows). Same order every time. */
  tp_status (*visit_gathered_state)(void *self, tp_state_visitor visit, void *user);
} tp_metric_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_METRIC_H */
