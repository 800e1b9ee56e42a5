/* torchhost plugin ABI: version numbers and the compatibility rule.
 *
 * The ABI version is separate from the product version. MAJOR changes when a released struct or
 * interface changes incompatibly (never expected: new behaviour gets a new interface id such as
 * "tp.model/2"). MINOR grows when members are appended to released structs; such members carry a
 * `@since 1.N` note. A host loads a plugin when the majors are equal and the plugin's minor is not
 * newer than the host's (the plugin may rely on members the host does not know otherwise).
 *
 * History (every minor is a superset of the one before; a host reads each struct only up to its
 * producer's struct_size, so plugins built for an older minor keep loading):
 *   1.0  the first release.
 *   1.1  tp_model_v1_t.set_activation_checkpointing (optional; NULL = not supported).
 *   1.2  config key type TP_CFG_PATH (config.h): a string the host resolves against the
 *        directory of the config file that set it.
 *   1.3  component kind TP_KIND_BATCH_TRANSFORM and its interface "tp.batch_transform/1"
 *        (iface/batch_transform.h): training-batch transforms such as Mixup and CutMix.
 *   1.4  tp_model_v1_t.layer_depths and .set_batchnorm_frozen (optional; NULL = not supported)
 *        with tp_layer_depth_t: fine-tuning controls (optim.layer_decay, model.freeze_bn_stats).
 *   1.5  the dataset split "test" (tp_dataset_v1_t.create) and tp_dataset_v1_t.prepare (optional;
 *        NULL = nothing to prepare): once-per-node data preparation before any rank reads.
 *   1.6  variable-size dataset fields: tp_dataset_v1_t.field_batching (optional; NULL = every
 *        field stacks) with tp_field_batching_t, TP_BATCH_PAD and TP_BATCH_RAGGED.
 *   1.7  metric state gathered across ranks: tp_metric_v1_t.visit_gathered_state (optional; NULL =
 *        every state tensor sums), for metrics over rows that do not add up (COCO mAP).
 *   1.8  tp_model_v1_t.check_graph_capture (optional; NULL = capturable): a model says whether its
 *        training step can be captured in a CUDA graph (run.cuda_graphs).
 *   1.9  tp_loss_v1_t.describe (optional; NULL = nothing declared) with tp_loss_description_t and
 *        tp_field_contract_t: what a loss expects of its target fields (checked before training)
 *        and which of its named terms have a floor (host verify's overfit check).
 *   1.10 tp_dataset_v1_t.sample_groups (optional; NULL = independent samples): the contiguous
 *        groups (tar shards, chunks) a dataset's samples are stored in, so the sampler reads each
 *        group's samples together (data.group_window).
 *   1.11 images the host decodes: tp_dataset_v1_t.encoded_images (optional; NULL = every field as
 *        it is) with tp_encoded_image_t, and tp_worker_ctx_t.encoded_images (zero from older
 *        hosts): a dataset hands an image field over as its file's bytes plus the crop and flip
 *        its CPU path draws, and the host decodes it on the device (data.decode).
 *   1.12 tp_dataset_v1_t.class_names (optional; NULL = no names) with tp_class_names_t: the names
 *        of a label field's classes, kept in checkpoints for `host export` and `host predict`.
 *   1.13 tp_dataset_v1_t.sample_keys (optional; NULL = no names): the name of each sample (its
 *        file, its shard and key), written beside each row of `host predict --split`.
 *   1.14 training hooks for teachers and cross-rank losses: tp_model_v1_t.after_optimizer_step
 *        (optional; NULL = no hook), called after every optimizer step with the step and the total,
 *        tp_model_v1_t.set_batchnorm_frozen_at (optional; NULL = not supported): BatchNorm layers
 *        named by the host kept in eval mode (a param-group rule's freeze_bn_stats),
 *        and the service "tp.dist/2" (host.h): all_reduce and an autograd-aware all_gather on the
 *        host's process group for Tier T plugins (SimCLR negatives across ranks, DINO's centre). */
#ifndef TP_VERSION_H
#define TP_VERSION_H

#include <stdbool.h>
#include <stdint.h>

#include "tp/macros.h"

#define TP_ABI_MAJOR 1
#define TP_ABI_MINOR 14
#define TP_ABI_PATCH 0

TP_EXTERN_C_BEGIN

/** A three-part version. Passed by value; plain data. */
typedef struct tp_version_t {
  uint32_t major;
  uint32_t minor;
  uint32_t patch; /* informational only; never part of compatibility */
} tp_version_t;

/** The ABI this header describes; plugins put it in `tp_entry.abi`. */
#define TP_ABI_VERSION_INIT {TP_ABI_MAJOR, TP_ABI_MINOR, TP_ABI_PATCH}

/** True when a host implementing `host` can load a plugin compiled against `plugin`.
 *  Rule: equal major, plugin minor <= host minor; patch ignored. [any] */
static inline bool tp_abi_is_compatible(tp_version_t host, tp_version_t plugin) {
  return host.major == plugin.major && plugin.minor <= host.minor;
}

TP_EXTERN_C_END

#endif /* TP_VERSION_H */
