/* torchhost plugin ABI, Tier S: datasets ("tp.dataset/1").
 *
 * A dataset is an indexable collection of samples. Each sample is a set of named fields ("image",
 * "label", ...), each a CPU tensor handed over as a DLPack `DLManagedTensor` with its deleter, so
 * a dataset plugin needs no LibTorch and can be written in plain C. The host's loader calls
 * get_sample from worker threads, turns fields into tensors without copying (at::fromDLPack),
 * stacks them into batches, and calls each deleter once the batch no longer needs the buffer.
 *
 * Lifecycle: [prepare(split), once per node] -> create(split) -> [set_epoch(e) -> get_sample(i)...]...
 * -> destroy. The host creates one instance per split it reads ("train", "val", and from ABI 1.5
 * "test").
 *
 * Randomness (augmentation) comes only from `tp_worker_ctx_t.seed`, which the host derives from
 * (run seed, rank, epoch, sample index); a dataset that follows this is reproducible (PLG-8).
 *
 * From ABI 1.11 an image dataset may hand an image over encoded (its file's bytes and the crop it
 * drew) for the host to decode on the device: tp_encoded_image_t, encoded_images below. From ABI
 * 1.12 a dataset may lend the names of its classes: tp_class_names_t, class_names below. */
#ifndef TP_IFACE_DATASET_H
#define TP_IFACE_DATASET_H

#include <stdint.h>

#include "tp/dlpack.h" /* pinned DLPack; include order against <ATen/dlpack.h> is irrelevant */

#include "tp/config.h"
#include "tp/host.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

#define TP_IFACE_DATASET_V1 "tp.dataset/1"

/** One named field of a sample. */
typedef struct tp_field_t {
  const char *name;        /* static storage in the plugin ("image"); unique within the sample */
  DLManagedTensor *tensor; /* new reference, kDLCPU, compact or strided; the host calls
                              tensor->deleter(tensor) exactly once, from any thread, so
                              `deleter` is never NULL (it frees the struct too; PLG-9). A scalar
                              field (a class label) has ndim 0, and its shape and strides may then
                              be NULL; with ndim > 0, shape is required and strides NULL means
                              compact. */
} tp_field_t;

/** How the loader forms one field of a batch from the field of B samples (ABI 1.6). A field a
 *  dataset does not declare stacks. Why values + offsets for ragged fields: plugin_api/README.md,
 *  "Variable-size fields". */
#define TP_BATCH_STACK 0  /* every sample the same dtype and shape S: the batch is [B, S...] */
#define TP_BATCH_PAD 1    /* the same dtype and ndim D >= 1, any sizes: each sample is padded at
                             the end of every dim with pad_value to the batch's largest size per
                             dim, [B, max...]; the host adds "<name>_lengths", int64 [B, D], each
                             sample's own sizes (so a loss or metric can ignore the padding; a
                             mask padded with its ignore index needs nothing more) */
#define TP_BATCH_RAGGED 2 /* the same dtype, ndim D >= 1 and sizes past dim 0; dim 0 (N_i) varies
                             and may be 0: the samples are concatenated along dim 0, [sum N_i,
                             ...], and the host adds "<name>_offsets", int64 [B + 1]: sample i is
                             rows offsets[i] .. offsets[i+1] - 1 (offsets[0] = 0) */

/** One field that does not stack (ABI 1.6), declared by tp_dataset_v1_t.field_batching. */
typedef struct tp_field_batching_t {
  uint32_t struct_size; /* = sizeof(tp_field_batching_t); also the array's stride (PLG-2) */
  uint32_t batching;    /* TP_BATCH_PAD or TP_BATCH_RAGGED (TP_BATCH_STACK is allowed, a no-op) */
  const char *name;     /* a field of every sample of the split */
  double pad_value;     /* TP_BATCH_PAD: the padded elements' value, converted to the field's dtype
                           (0 for an image, the ignore index such as 255 for a class mask, so
                           losses and metrics skip padded pixels); ignored otherwise */
} tp_field_batching_t;

/** Where and when get_sample runs. Borrowed for the duration of the call; never NULL (the loader
 *  and `host plugins check` always pass one). */
typedef struct tp_worker_ctx_t {
  uint32_t struct_size;
  uint32_t worker;      /* 0..num_workers-1 */
  uint32_t num_workers;
  int32_t rank;         /* global rank of this process */
  uint64_t epoch;       /* 0-based */
  /* Seed for this sample's randomness, derived by the host from (run seed, rank, epoch, index).
   * It does not depend on the worker, so results are identical for any num_workers. How it fits
   * PLG-8: what sample `index` *is* (which file, which label, which generated shape) is a pure
   * function of the config, the split and the index, and never reads this seed; only random
   * augmentation (a flip, a crop) draws from it, so it differs per epoch and rank yet repeats
   * exactly for the same (run seed, rank, epoch, index). A dataset without augmentation ignores
   * it. */
  uint64_t seed;
  /* @since 1.11. Nonzero: the host asks for the encoded form of every image field this instance
   * declared available (tp_dataset_v1_t.encoded_images, tp_encoded_image_t): in place of the
   * pixel field `name`, get_sample writes `name` (the image file's bytes) and `<name>_box` (the
   * crop and flip the CPU path would apply), and the host decodes on the device. Zero: pixels as
   * before; every host before 1.11, the CPU decode path, and the host's per-sample fallback (a
   * size the header did not give, bytes the device decoder refused) pass zero. Read it only when
   * struct_size covers it (a 1.10 host's context ends before it; PLG-2). */
  uint32_t encoded_images
#if defined(__cplusplus) && __cplusplus >= 201402L
      = 0 /* a C++ context initialised positionally for ABI <= 1.10 compiles without
             -Wmissing-field-initializers, and asks for pixels */
#endif
      ;
} tp_worker_ctx_t;

/** One image field a dataset can hand over encoded, for the host to decode on the device.
 *  @since 1.11. Declared by tp_dataset_v1_t.encoded_images. `available` promises that when
 *  tp_worker_ctx_t.encoded_images is set, get_sample writes, in place of the pixel field `name`:
 *    `name`        uint8 [N]: the image file's bytes exactly as stored (JPEG or any other format);
 *    `<name>_box`  int32 [7]: x0, y0, x1, y1 (the crop in the stored image's pixels, x1 and y1
 *                  exclusive, at full resolution: what the CPU path cuts with fast_decode off),
 *                  flip (0 or 1: mirror left-right after resizing), height, width (the stored
 *                  image's size as its header declares it; 0, 0 when the plugin could not read a
 *                  JPEG's size without decoding: the host then asks for that sample's pixels with
 *                  encoded_images = 0);
 *  every other field as usual. The box and flip are the ones the CPU path draws from the same
 *  ctx->seed and the image's original size (PLG-19). The host makes the pixel field from them:
 *  the crop resized to out_height x out_width with OpenCV's semantics (INTER_AREA when shrinking
 *  in both directions, INTER_LINEAR when enlarging, and when one side shrinks and the other
 *  grows INTER_AREA along the shrinking side then INTER_LINEAR, as the image datasets' CPU path
 *  resizes since data trial F10), then the flip, then
 *  (rgb / 255 - mean[c]) / std[c] in R, G, B order: what the CPU path makes with its full-scale
 *  decode, up to the device decoder's own rounding. */
typedef struct tp_encoded_image_t {
  uint32_t struct_size;    /* = sizeof(tp_encoded_image_t); also the array's stride (PLG-2) */
  uint32_t available;      /* nonzero: this split can hand `name` over encoded; zero: it cannot,
                              `reason` says why */
  const char *name;        /* the pixel field it replaces ("image"); borrowed as the array */
  const char *reason;      /* available == 0: one sentence naming the key that prevents it
                              ("rand_augment transforms decoded pixels"); else NULL */
  int32_t out_height;      /* the pixel field's [3, out_height, out_width], the same for every
                              sample (available != 0: both > 0) */
  int32_t out_width;
  float mean[3];           /* pixel = (rgb / 255 - mean[c]) / std[c], c over R, G, B */
  float std[3];
  uint32_t channels_last;  /* nonzero: the pixel field is strided channels-last on the CPU path
                              (strides {1, 3 W, 3}); the host lays its pixels out alike */
} tp_encoded_image_t;

/** The names of the classes an integer label field's values stand for. @since 1.12. Lent by
 *  tp_dataset_v1_t.class_names. The host checks them (a count equal to the class_count the loss
 *  declares for `field`, when it declares one; each name non-empty, valid UTF-8 without control
 *  characters, at most 256 bytes; at most 1,000,000 names) and keeps them in the run's
 *  checkpoints, so `host export` writes them into the exported file and `host predict` names the
 *  class of each row's argmax. Names need not be unique (a CSV may label two ids alike). */
typedef struct tp_class_names_t {
  uint32_t struct_size;     /* = sizeof(tp_class_names_t) (PLG-2) */
  uint32_t count;           /* entries of `names`: the classes 0 .. count - 1 */
  const char *field;        /* the integer label field ("label") whose value i means names[i] */
  const char *const *names; /* count UTF-8 strings in label-id order; borrowed as the struct */
} tp_class_names_t;

typedef struct tp_dataset_v1_t {
  uint32_t struct_size; /* = sizeof(tp_dataset_v1_t) */

  /** [main] Creates the dataset for `split` ("train", "val" or, from ABI 1.5, "test"). `host` is
   *  borrowed until deinit(); `cfg` only during the call. *out_self is released with destroy().
   *  Which table `cfg` is: the run's [data.train] for "train"; for "val", [data.val] when the run
   *  has one, else (data.val_from_train = true) [data.train] again; for "test" likewise [data.test]
   *  or (data.test_from_train = true) [data.train]. So a split's size and source reach create
   *  only through your own keys: a dataset that serves several splits from one table declares a
   *  key per split (e.g. `size`, `val_size`, `test_size`) and picks by `split`. The host asks a
   *  plugin built for ABI < 1.5 for "test" never (it refuses the run, naming the plugin). */
  tp_status (*create)(const tp_host_t *host, const tp_config_t *cfg, const char *split,
                      void **out_self);
  /** [main] Accepts NULL. Every DLPack tensor from this instance may still be alive; their
   *  deleters must not depend on `self`. */
  void (*destroy)(void *self);
  /** [any] Number of samples. Constant for the life of the instance. */
  tp_status (*size)(const void *self, uint64_t *out_count);
  /** [worker] Writes up to `capacity` fields to out_fields and their number to *out_count.
   *  Concurrent across workers unless the descriptor sets TP_DESCRIPTOR_SERIAL. On error, no
   *  field is handed over: the plugin frees what it made, and the host never reads out_fields
   *  after a failed call (PLG-9, "outputs of a failed call"; the stable tier keeps the rule it
   *  was released with). On success, the first *out_count fields are handed over; if the host
   *  cannot use one (no name, a NULL deleter, a dtype LibTorch refuses), it still calls the
   *  deleter of every one that has one. The loader asks only for `index` < size(); an index past
   *  the end returns TP_ERR_OUT_OF_RANGE (`host plugins check` asks). `ctx` is never NULL. Every
   *  sample of a split has the same field names, dtypes and shapes (the loader stacks them into
   *  batches), except the sizes field_batching (ABI 1.6) lets vary. The sample is f(config,
   *  split, index), plus ctx->seed for augmentation only (PLG-8, see tp_worker_ctx_t.seed). */
  tp_status (*get_sample)(const void *self, uint64_t index, const tp_worker_ctx_t *ctx,
                          tp_field_t *out_fields, uint32_t capacity, uint32_t *out_count);
  /** [main] Optional (may be NULL). Called before each epoch, while no get_sample runs. */
  tp_status (*set_epoch)(void *self, uint64_t epoch);

  /** [main] Optional (may be NULL). @since 1.5. One-time preparation of `split`'s data on this
   *  node: build an index or cache file, unpack an archive, download. The host calls it on local
   *  rank 0 of every node, once per run and split it reads, before any rank calls create; the
   *  other ranks wait (up to dist.timeout_s) and a failure ends every rank with its message
   *  (PLG-17). `cfg` is the same table create receives. It must be idempotent (every run calls
   *  it: a second call finds its work done and returns quickly), must leave its results complete
   *  or absent (write to a temporary name, then rename: a rank killed midway must not leave a
   *  half-written cache that create trusts), and create must work without it (`host plugins
   *  check`, an older host) — slower, or by doing the work itself. No instance exists yet. */
  tp_status (*prepare)(const tp_host_t *host, const tp_config_t *cfg, const char *split);

  /** [main] Optional (may be NULL: every field stacks). @since 1.6. The fields of this instance's
   *  split that do not stack: *out_fields points to *out_count entries, borrowed until destroy
   *  (static storage or the instance's own), each name at most once; a field not listed stacks.
   *  The host calls it once, right after create. Variable-size fields then relax get_sample's
   *  "same shapes" rule as TP_BATCH_PAD / TP_BATCH_RAGGED say; names and dtypes stay the same
   *  for every sample. A dataset must not also produce a field named like one the host adds
   *  ("<name>_lengths", "<name>_offsets"); the host refuses such a sample. */
  tp_status (*field_batching)(const void *self, const tp_field_batching_t **out_fields,
                              uint32_t *out_count)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr /* a C++ table initialised positionally for ABI <= 1.5 compiles without
                   -Wmissing-field-initializers (as model.h's appended members) */
#endif
      ;

  /** [main] Optional (may be NULL: the samples are independent). @since 1.10. The contiguous
   *  groups this instance's samples are stored in, for a dataset that reads best in order (a tar
   *  shard, a file chunk, an LMDB or HDF5 range, a Parquet row group): *out_group_ends points to
   *  *out_count entries, borrowed until destroy (the instance's own storage), strictly increasing,
   *  the last equal to size(); group g holds the samples [ends[g - 1], ends[g]) with ends[-1] = 0.
   *  The host calls it once, right after create (never with size() = 0). With groups, the host's
   *  sampler shuffles the order of the groups every epoch and the samples only within a window of
   *  `data.group_window` consecutive groups, and gives each rank a contiguous run of that order,
   *  so a rank reads each group's samples close together (docs/datasets.md, "Sharded data").
   *  The sample itself stays f(config, split, index) (PLG-8): groups change which order indices
   *  come in, never what an index is. */
  tp_status (*sample_groups)(const void *self, const uint64_t **out_group_ends, uint64_t *out_count)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;

  /** [main] Optional (may be NULL: every field is handed over as it is). @since 1.11. The image
   *  fields this instance can hand over encoded, for the host to decode on the device
   *  (`data.decode`): *out_images points to *out_count entries (tp_encoded_image_t), borrowed
   *  until destroy (the instance's own storage), each `name` at most once and a field of every
   *  sample. The host calls it once, right after create. An entry with `available` set is a
   *  promise: whenever ctx->encoded_images is set, get_sample hands that field over encoded, with
   *  the crop and flip its CPU path would draw from the same seed (PLG-19); an entry without it
   *  says, in `reason`, which key keeps the split on the CPU path (augmentation on decoded pixels,
   *  an output size that is not fixed), so the host can tell the user. */
  tp_status (*encoded_images)(const void *self, const tp_encoded_image_t **out_images, uint32_t *out_count)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;

  /** [main] Optional (may be NULL: the classes have no names here). @since 1.12. The names of the
   *  classes this instance's label field stands for (tp_class_names_t), in label-id order: the
   *  folder names of an image folder, the names of a CSV's labels. *out_names is borrowed until
   *  destroy (the instance's own storage), or NULL when this instance knows no names (integer
   *  labels without names: lend nothing rather than invent "0", "1", ...). The host calls it once,
   *  right after create, and refuses the run, naming the plugin, when the declaration is malformed
   *  (see tp_class_names_t). */
  tp_status (*class_names)(const void *self, const tp_class_names_t **out_names)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;

  /** [main] Optional (may be NULL: the samples have no names here). @since 1.13. The name of each
   *  sample of this instance, for the rows of `host predict --split` (a `path` column beside
   *  `index`): *out_keys points to *out_count UTF-8 strings in index order, *out_count equal to
   *  size(), borrowed until destroy (the instance's own storage). A name says where the sample
   *  comes from, so a user can open it: the image file as the dataset reads it, a shard and its
   *  member key ("shards/train-000003.tar:img_0042"), an annotation file's image name. A NULL
   *  entry: that sample has no name (its cell is empty). The host calls it at most once per
   *  instance, after create and only where it writes the names (host predict, host plugins
   *  check), so a dataset may build the list on the first call. The host refuses, naming the
   *  plugin, a count other than size() and a name longer than 4096 bytes. */
  tp_status (*sample_keys)(const void *self, const char *const **out_keys, uint64_t *out_count)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;
} tp_dataset_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_DATASET_H */
