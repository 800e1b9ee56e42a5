/* torchhost plugin ABI, Tier T: batch transforms ("tp.batch_transform/1"), @since 1.3.
 *
 * A batch transform rewrites a whole training micro-batch on the device, after the host placed it
 * there and before the model's forward: Mixup and CutMix blend pairs of samples and turn class
 * labels into probabilities, which no per-sample dataset augmentation can do. The host applies the
 * run's transforms (`[[data.batch_transforms]]`) in order, to training micro-batches only;
 * evaluation batches never pass through them.
 *
 * Lifecycle: create -> apply... -> destroy, all [main].
 *
 * Randomness (PLG-8): a transform draws only from the `seed` of each call, never from a global
 * generator, the time or its own state, so a resumed run and any num_workers see the same blend.
 * The host derives the seed from the run seed, the rank, the epoch and the micro-batch's index in
 * the epoch, and from the transform's position in the list (batch_transform_seed in the framework's
 * engine/batch_transforms.h; plugin_api/README.md, "Batch transforms").
 *
 * Rationale (Tier T, not Tier S): the blend is device work on the placed batch. A Tier S (DLPack,
 * CPU) transform would run on the host's training thread between loader and device, or force the
 * loader to build pairs across samples it loads independently. */
#ifndef TP_IFACE_BATCH_TRANSFORM_H
#define TP_IFACE_BATCH_TRANSFORM_H

#include <stdint.h>

#include "tp/config.h"
#include "tp/host.h"
#include "tp/iface/tensor.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

#define TP_IFACE_BATCH_TRANSFORM_V1 "tp.batch_transform/1"

typedef struct tp_batch_transform_v1_t {
  uint32_t struct_size; /* = sizeof(tp_batch_transform_v1_t) */

  /** [main] `host` borrowed until deinit(); `cfg` only during the call. *out_self is released
   *  with destroy(). Validate the options here (a bad value is TP_ERR_CONFIG naming the key).
   *  @since 1.3 */
  tp_status (*create)(const tp_host_t *host, const tp_config_t *cfg, void **out_self);

  /** [main] Accepts NULL. @since 1.3 */
  void (*destroy)(void *self);

  /** [main] Transforms one training micro-batch. `fields` (borrowed, for the call) are all the
   *  batch's fields, on the training device, batch dimension first; never modify them in place
   *  (the host may still hold them). Writes up to `capacity` replacement fields into
   *  `out_fields` and their number into *out_count: each name is one of `fields`' names (or a
   *  new field the model, loss or metrics read), valid until destroy(); each tensor is a new
   *  reference released by the host. The host replaces the fields named in the outputs and keeps
   *  the others unchanged; writing no output leaves the batch as it is. More outputs than
   *  `capacity` is an error (TP_ERR_INVALID_ARGUMENT).
   *  `seed` is the only source of randomness for this call: the same seed and fields give the
   *  same outputs. The host passes every slot NULL. On error, every handle left in a slot is
   *  still a new reference that the host releases (PLG-9, "outputs of a failed call"); a plugin
   *  that released one itself sets its slot back to NULL. Never synchronize the device beyond
   *  what the transform needs (PLG-11); grad mode is off (batch fields carry no history).
   *  @since 1.3 */
  tp_status (*apply)(void *self, uint64_t seed, const tp_named_tensor_t *fields, uint32_t field_count,
                     tp_named_tensor_t *out_fields, uint32_t capacity, uint32_t *out_count);
} tp_batch_transform_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_BATCH_TRANSFORM_H */
