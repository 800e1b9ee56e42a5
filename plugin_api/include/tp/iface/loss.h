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

/** What a loss expects of the values of one target field (@since 1.9): the host checks every
 *  sample `host plugins check --config` and `host verify` read, and the first training batch,
 *  against it before training, and names the samples that break it. */
enum {
  /** Floating [N, 4] rows (a ragged field's rows, or a stacked [B, N, 4]): boxes as
   *  (x1, y1, x2, y2), every corner finite, x2 > x1 and y2 > y1. Boxes given as (x, y, w, h)
   *  break it wherever w <= x or h <= y. */
  TP_CONTRACT_BOXES_XYXY = 1,
  /** Integer class ids: every value in [0, class_count), or >= 0 when class_count is 0 (the
   *  loss learns its class count only from the model's outputs). */
  TP_CONTRACT_CLASS_IDS = 2
};

/** One field's contract. Borrowed from the loss (see describe). */
typedef struct tp_field_contract_t {
  uint32_t struct_size; /* = sizeof(tp_field_contract_t) */
  int32_t kind;         /* TP_CONTRACT_* */
  const char *field;    /* the target field's name, as the batch carries it */
  int64_t class_count;  /* TP_CONTRACT_CLASS_IDS: values lie below it; 0 = not known here */
} tp_field_contract_t;

/** What a loss declares about itself (@since 1.9), for the host's checks. Owned by the loss and
 *  valid, unchanged, until destroy(). A host reads it up to its struct_size. */
typedef struct tp_loss_description_t {
  uint32_t struct_size; /* = sizeof(tp_loss_description_t) */
  /** The target fields' contracts, each contracts[0].struct_size bytes after the one before (an
   *  array of tp_field_contract_t); may be NULL when contract_count is 0. */
  const tp_field_contract_t *contracts;
  uint32_t contract_count;
  /** Names of named terms (see terms) with a floor above zero that no model reaches, such as a
   *  binary cross-entropy against soft targets (its floor is the targets' entropy). `host
   *  verify`'s overfit check judges the other terms' sum and reports these. May be NULL when
   *  floored_term_count is 0. */
  const char *const *floored_terms;
  uint32_t floored_term_count;
  /** The fraction of its first value that the loss less its floored terms falls below when a
   *  correct model memorises two batches (`host verify`'s overfit check, 300 steps at the run's
   *  learning rate); 0 = the host's 0.05. A loss with a term that falls slowly near zero (a GIoU
   *  box loss) declares more: about twice what a correct model reaches halfway through. */
  double overfit_fraction;
} tp_loss_description_t;

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
  /** [main] Optional (NULL, or absent from an older table: the loss has no named terms). The
   *  named terms of the forward() call just made, for the history: `train/loss/<name>` and
   *  `val/loss/<name>`, normalised exactly like the total (the host sums each term over the
   *  accumulation window and the ranks and divides by the same item count). Writes up to
   *  `capacity` entries into `out_terms` and their number into *out_count: each name is valid
   *  until destroy() and the same on every call; each tensor is a new reference (released by the
   *  host) to a 0-dim floating tensor on the outputs' device holding the term's SUM over the
   *  forward's items, without autograd history, such that the terms add up to the loss sum. The
   *  host calls it right after every successful forward() and passes every slot NULL; on error
   *  PLG-9's "outputs of a failed call" applies. Never synchronize the device here.
   *  @since 1.3 */
  tp_status (*terms)(void *self, tp_named_tensor_t *out_terms, uint32_t capacity, uint32_t *out_count);
  /** [main] Optional (NULL, or absent from an older table: the loss declares nothing). Writes
   *  into *out_description a description the loss owns, valid and unchanged until destroy(); the
   *  host passes it NULL and calls this once, after create(). @since 1.9 */
  tp_status (*describe)(void *self, const tp_loss_description_t **out_description);
} tp_loss_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_LOSS_H */
