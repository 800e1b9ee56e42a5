/* torchhost plugin ABI, Tier T: losses ("tp.loss/1").
 *
 * A loss returns the SUM of its per-item losses and the number of items it summed over. The host
 * adds sums and counts over the whole gradient-accumulation window (and across ranks) and divides
 * once, so the loss of a window is exact whatever the micro-batch sizes.
 * What an item is belongs to the loss: a sample for classification, a token for language models,
 * a valid pixel for masked losses. */
#ifndef TP_IFACE_LOSS_H
#define TP_IFACE_LOSS_H

#include <stdint.h>

#include "tp/config.h"
#include "tp/host.h"
#include "tp/iface/tensor.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

#define TP_IFACE_LOSS_V1 "tp.loss/1"

typedef struct tp_loss_v1_t {
  uint32_t struct_size; /* = sizeof(tp_loss_v1_t) */
  /** [main] `host` borrowed until deinit(); `cfg` only during the call. */
  tp_status (*create)(const tp_host_t *host, const tp_config_t *cfg, void **out_self);
  /** [main] Accepts NULL. */
  void (*destroy)(void *self);
  /** [main] `outputs` are the model's outputs, `targets` the batch's fields (both borrowed for
   *  the call). Writes two new references, released by the host: *out_loss_sum, a 0-dim
   *  floating tensor holding the sum of per-item losses (differentiable, on the outputs'
   *  device), and *out_item_count, a 0-dim tensor (any numeric dtype, no grad) holding the
   *  number of items summed. A count is a tensor so that masked losses can count valid items
   *  on the device without a CPU-GPU sync. The host passes both NULL. On error, a handle left in
   *  either is still a new reference that the host releases (PLG-9, "outputs of a failed
   *  call"); a plugin that released one itself sets it back to NULL. */
  tp_status (*forward)(void *self, const tp_named_tensor_t *outputs, uint32_t output_count,
                       const tp_named_tensor_t *targets, uint32_t target_count,
                       tp_tensor *out_loss_sum, tp_tensor *out_item_count);
} tp_loss_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_LOSS_H */
