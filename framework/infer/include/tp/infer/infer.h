/* tp/infer/infer.h: the C API of the inference library (docs/deployment.md, "The inference
 * library"), for callers in C and other languages. It wraps tp/infer/model.h: a model `host export`
 * wrote, built by its own plugin, answering batches of image files or of prepared tensors.
 *
 * Lifecycle: tp_infer_open -> tp_infer_run_files / _run_encoded / _run_tensor / _run_tensors (any
 * number of times, from any thread) -> tp_infer_result_free for each result -> tp_infer_close.
 *
 * Errors: every function that can fail returns a tp_status (tp/status.h) that says whose fault
 * it is (tp::infer::Error::Kind in the C++ API), so a server can answer "bad request" or "we are
 * broken" without reading the message:
 *   TP_OK                    success;
 *   TP_ERR_INVALID_ARGUMENT  the caller's input: a NULL argument, a zero count, a bad count or
 *                            name, an image that cannot be read (corrupt, truncated, missing, not
 *                            an image), a tensor whose shape or values the model refuses, a call
 *                            on a closing model;
 *   TP_ERR_OUT_OF_RANGE      an output, image, rank or row index past what the result holds;
 *   TP_ERR_CONFIG            the deployment: the export (missing, unreadable, damaged, of another
 *                            format), a plugin missing or refused, weights that do not fit its
 *                            model, the device, TMPDIR, TORCHHOST_INFER_LOG_LEVEL, another CUDA
 *                            model's TF32;
 *   TP_ERR_OUT_OF_MEMORY     an allocation failed (LibTorch's, a device's, the library's): a
 *                            smaller batch may pass;
 *   TP_ERR_INTERNAL          anything else: a plugin call that failed on inputs the export's own
 *                            preprocessing made, a device error, a bug.
 * Then tp_infer_last_error() holds the message (one paragraph: what and what to do), and
 * tp_infer_status_name() the status's name. No exception and no abort crosses this API.
 *
 * Ownership: handles are opaque; each open/run has its matching close/free, which accept NULL.
 * Closing or freeing a handle twice, or using it after, is undefined (as free()); a result
 * outlives its model. Strings and arrays returned are borrowed from the handle named, valid until
 * it is freed. Out-parameters: a call that creates a handle (tp_infer_open, tp_infer_open_with,
 * the tp_infer_run_* calls) sets `*out_model` / `*out_result` to NULL when it fails (whenever the
 * pointer itself is not NULL), so there is nothing to free after an error; accessors leave their
 * out pointers unchanged when they fail. Inputs: every string and array passed in (paths, names,
 * image bytes, tensor data, shapes) is read or copied during the call only; the caller may free
 * or reuse it once the call returns.
 *
 * Counting: a result's rows (one per image answered) are the first size of any output's shape
 * (tp_infer_result_output's `(*out_shape)[0]`); the call's count minus
 * tp_infer_result_failed_count. The `image` of tp_infer_result_class_count / _class is such a
 * row, not the call's list position once images were left out: tp_infer_result_row maps it.
 *
 * Linking: libtorchhost_infer.so (CMake: find_package(torchhost CONFIG), target torchhost::infer)
 * exports these functions (TP_EXPORT) and tp/infer/model.h's classes, nothing else.
 *
 * Threads: every function may be called from any thread, and calls on one model or one result
 * may overlap each other, with these exceptions. tp_infer_close(model) must overlap none of the
 * accessors and setters of that model (tp_infer_model_*, tp_infer_set_*), which do not wait for
 * it: stop them first; the run calls (tp_infer_run_*) in flight are waited for, and one that
 * begins while it closes fails (TP_ERR_INVALID_ARGUMENT). tp_infer_result_free(result) must
 * overlap no other call on that result (several threads may read one result at once). Several
 * models may be open at once; calls into them take turns across the process (one batch at a
 * time). They share the process's plugin libraries; those on CUDA must agree on TF32, one switch
 * per process. The last error is per thread.
 *
 * Fork: in a child forked after the process's first tp_infer_open, every call (on an inherited
 * model, and tp_infer_open and the calls of the child's own models) runs on one intra-op thread,
 * whatever tp_infer_set_threads says: LibTorch's OpenMP pool does not survive fork, and more
 * than one thread would hang the child. To give a pre-fork server's workers their threads, open
 * the models in each worker after the fork, none before. Fork only while no other thread is in a
 * call of this library (docs/deployment.md, "Fork"). */
#ifndef TP_INFER_INFER_H
#define TP_INFER_INFER_H

#include <stdint.h>

#include "tp/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opened model. */
typedef struct tp_infer_model_t tp_infer_model_t;
/** The answer for one batch: its outputs and, for a classifier, each image's best classes. */
typedef struct tp_infer_result_t tp_infer_result_t;

/** The message of the calling thread's last failed call (UTF-8, one paragraph: what failed and
 *  what to do); "" when none failed. Borrowed: valid until this thread's next call. */
TP_EXPORT const char *tp_infer_last_error(void);

/** The name of `status` as tp/status.h spells it ("TP_ERR_CONFIG"), static storage; "unknown
 *  status" for a value it does not define. For logs and bindings that do not copy the enum. */
TP_EXPORT const char *tp_infer_status_name(tp_status status);

/** Opens `export_file` (what `host export` wrote) on `device` ("cpu", "cuda", "cuda:N"; NULL means
 *  "cpu"), loading the plugins of `plugin_dir`: the directory holding the plugin that builds the
 *  model and the one that reads its images, or several separated by ':' (your own plugins' and
 *  the installed host's lib/torchhost/plugins; earlier ones take precedence; a directory whose
 *  path holds ':' is named through a link). On a CUDA device it turns LibTorch's TF32 switches
 *  off, process-wide, as `host predict` runs by default (OpenOptions::tf32 in the C++ API). On
 *  TP_OK `*out_model` is a new model: close it with tp_infer_close; else it is NULL.
 *  TP_ERR_INVALID_ARGUMENT: a NULL export_file, plugin_dir or out_model, an empty plugin_dir, a
 *  device name that is no device. TP_ERR_CONFIG: the export missing, unreadable, damaged, no
 *  torchhost export or of another format; a model file outside the export's directory
 *  (tp_infer_open_with); a plugin missing or refused, or replaced on disk since this process
 *  loaded it (its first build stays loaded: restart the process to load the new one); weights that do not fit
 *  the model; CUDA absent or the GPU index past those visible; another CUDA model's TF32;
 *  TORCHHOST_INFER_LOG_LEVEL unknown (unless tp_infer_set_log was called). TP_ERR_OUT_OF_MEMORY. */
TP_EXPORT tp_status tp_infer_open(const char *export_file, const char *device, const char *plugin_dir,
                                  tp_infer_model_t **out_model);

/** tp_infer_open_with's flag: the export's model may load files outside the export's directory
 *  (OpenOptions::allow_files_outside_export: a TorchScript program is code; only for an export
 *  you trust). */
#define TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT 1u

/** As tp_infer_open, with `flags`: 0 or TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT. Without the
 *  flag (and from tp_infer_open), an export whose model names a file outside its own directory
 *  is refused, TP_ERR_CONFIG naming the file; TP_ERR_INVALID_ARGUMENT for a flag it does not
 *  define. */
TP_EXPORT tp_status tp_infer_open_with(const char *export_file, const char *device, const char *plugin_dir,
                                       uint32_t flags, tp_infer_model_t **out_model);

/** As tp_infer_open_with, with changes to the options the export's model is built with (the
 *  C++ OpenOptions::model_options): `model_options` holds `option_count` strings "key=value" (read
 *  during the call; may be NULL when option_count is 0), as `host predict --set model.key=value`
 *  takes them, later ones winning: a detector's serving threshold and NMS ("score_thresh=0.4",
 *  "nms_thresh=0.5", "detections_per_img=20" for org.torchhost.fcos) instead of the run's
 *  evaluation values the export keeps. TP_ERR_CONFIG: an unknown key or a value of the wrong type
 *  (the message names the entry, and the closest key), besides tp_infer_open_with's.
 *  TP_ERR_INVALID_ARGUMENT: a NULL entry or array, an entry without '=', a dotted key, the key
 *  "component". */
TP_EXPORT tp_status tp_infer_open_configured(const char *export_file, const char *device, const char *plugin_dir,
                                             uint32_t flags, const char *const *model_options,
                                             uint32_t option_count, tp_infer_model_t **out_model);

/** Releases `model` and its plugins. Results of it stay valid (they own their data). NULL: no-op.
 *  It waits for the run calls (tp_infer_run_*) in flight on `model` to return; one that begins
 *  while it closes fails (TP_ERR_INVALID_ARGUMENT, "is being closed"). The accessors and setters
 *  (tp_infer_model_*, tp_infer_set_*) are not waited for: none may overlap it. Any call begun after
 *  it returned, a second close included, uses a freed handle, undefined as after free(): stop
 *  your callers first. */
TP_EXPORT void tp_infer_close(tp_infer_model_t *model);

/** Reads `count` image files (`paths`, copied during the call) with the export's evaluation
 *  preprocessing (as `host predict --images` does) and runs them as one batch; each image's
 *  `top_k` best classes are kept (capped at the class count: UINT32_MAX keeps every class). A
 *  segmenter's per-pixel output comes at each file's size, followed by "<name>_sizes"
 *  (tp::infer::Batch::outputs says how).
 *  On TP_OK `*out_result` is new: free it with tp_infer_result_free; else it is NULL.
 *  TP_ERR_INVALID_ARGUMENT: a NULL or empty argument, count 0, an image that cannot be read (the
 *  first in the list; or every one, with tp_infer_set_skip_bad_images), a closing model.
 *  TP_ERR_CONFIG: the export carries no preprocessing, or no plugin directory provides its
 *  dataset. TP_ERR_OUT_OF_MEMORY. TP_ERR_INTERNAL: the model failed on the decoded batch. */
TP_EXPORT tp_status tp_infer_run_files(tp_infer_model_t *model, const char *const *paths, uint32_t count,
                                       uint32_t top_k, tp_infer_result_t **out_result);

/** The most bytes one image of tp_infer_run_encoded may hold: 1 GiB, the most an image file may
 *  hold for the image datasets. */
#define TP_INFER_MAX_ENCODED_BYTES (UINT64_C(1) << 30)

/** As tp_infer_run_files, for `count` images held in memory: image i is `sizes[i]` bytes at
 *  `data[i]` (a JPEG, PNG, BMP or WebP file's bytes), copied during the call (size your
 *  buffers: a size past one reads past it); a size above TP_INFER_MAX_ENCODED_BYTES is refused,
 *  TP_ERR_INVALID_ARGUMENT naming it, before anything is read. Decoded exactly as that file would be: each
 *  is written to a file of a private temporary directory under TMPDIR (mkdtemp, mode 0700),
 *  removed before the call returns; a process killed during the call leaves it behind. As
 *  tp_infer_run_files otherwise; TP_ERR_CONFIG also for a TMPDIR it cannot write. */
TP_EXPORT tp_status tp_infer_run_encoded(tp_infer_model_t *model, const uint8_t *const *data,
                                         const uint64_t *sizes, uint32_t count, uint32_t top_k,
                                         tp_infer_result_t **out_result);

/** Runs one prepared float32 input field `name` (e.g. "image") of shape `shape[0..ndim)`, batch
 *  dimension first, row-major `data` (copied during the call): it must hold the product of the
 *  shape's sizes in floats, which this call reads without a length to check them against. As
 *  tp_infer_run_files otherwise, but TP_ERR_INVALID_ARGUMENT also for a shape of no element or
 *  one the model refuses (the model's plugin said TP_ERR_INVALID_ARGUMENT). */
TP_EXPORT tp_status tp_infer_run_tensor(tp_infer_model_t *model, const char *name, const float *data,
                                        const int64_t *shape, uint32_t ndim, uint32_t top_k,
                                        tp_infer_result_t **out_result);

/** As tp_infer_run_tensor, for a model with several input fields (configs/multi_input.toml's
 *  two_stream reads "image" and "image2"): `count` tensors, tensor i the field `names[i]` of shape
 *  `shapes[i][0..ndims[i])`, row-major `data[i]` holding the product of that shape's sizes in
 *  floats (read without a length to check them against), all copied during the call: the caller
 *  may free or reuse every array once it returns. They must share the batch size N. The export's
 *  torchhost.model names the fields (`input` or `inputs`). On TP_OK `*out_result` is new: free it
 *  with tp_infer_result_free; else it is NULL. TP_ERR_INVALID_ARGUMENT: a NULL argument (naming
 *  it, as `names[1]`), count 0, a shape of no element, batch sizes that differ, two tensors of
 *  one name, a name the model does not read (naming it and the model's inputs), a missing field
 *  or a shape the model refuses (the model's plugin said TP_ERR_INVALID_ARGUMENT), a closing
 *  model. TP_ERR_OUT_OF_MEMORY. TP_ERR_INTERNAL: the model failed otherwise. */
TP_EXPORT tp_status tp_infer_run_tensors(tp_infer_model_t *model, const char *const *names, const float *const *data,
                                         const int64_t *const *shapes, const uint32_t *ndims, uint32_t count,
                                         uint32_t top_k, tp_infer_result_t **out_result);

/** The levels of the library's log (tp::infer::LogLevel). */
#define TP_INFER_LOG_DEBUG 0
#define TP_INFER_LOG_INFO 1
#define TP_INFER_LOG_WARNING 2
#define TP_INFER_LOG_ERROR 3

/** Receives one line of the library's log: `user_data` as given to tp_infer_set_log, its level
 *  (TP_INFER_LOG_*), its source ("tp::infer" for the library's own lines, "plugin <name>"
 *  for a plugin's) and its text (UTF-8, one paragraph, at most 16 KiB, no timestamp, no
 *  newline at the end). Both strings are borrowed for the call only. */
typedef void (*tp_infer_log_fn)(void *user_data, int32_t level, const char *source, const char *message);

/** Routes the log of every model of the process, from the next line on, to `log` (NULL: stderr,
 *  "<time> [<source>] <level>: <text>", the default) and keeps the lines of `least_level`
 *  (TP_INFER_LOG_*) and above. Lines are handed over one at a time, from whichever thread logs
 *  them (a caller's, during its open or run call); `log` must not call this library. Once called,
 *  TORCHHOST_INFER_LOG_LEVEL is no longer read. TP_ERR_INVALID_ARGUMENT for a level it does not
 *  define (nothing changed); else TP_OK. */
TP_EXPORT tp_status tp_infer_set_log(tp_infer_log_fn log, void *user_data, int32_t least_level);

/** Releases `result` and every string and array borrowed from it. NULL: no-op. Freeing it twice,
 *  or any call on it after (or during) the free, is undefined (as free()). */
TP_EXPORT void tp_infer_result_free(tp_infer_result_t *result);

/** LibTorch's intra-op threads for `model`'s calls from now on (OpenOptions::threads, set on the
 *  calling thread when a call begins); 0 is LibTorch's default count (OMP_NUM_THREADS, else one
 *  per core, read when the first model of the process opened), whatever count other models set.
 *  TP_ERR_INVALID_ARGUMENT for NULL or a count of 1024 or more; else TP_OK. */
TP_EXPORT tp_status tp_infer_set_threads(tp_infer_model_t *model, uint32_t threads);

/** The number of outputs the model returned (0 for NULL). Each output's shape begins with the
 *  result's row count. */
TP_EXPORT uint32_t tp_infer_result_output_count(const tp_infer_result_t *result);

/** Output `index` (< tp_infer_result_output_count): its name, its shape (`*out_ndim` sizes, batch
 *  first) and its values as float32, row-major. All borrowed from `result`. TP_ERR_INVALID_ARGUMENT
 *  for a NULL result, TP_ERR_OUT_OF_RANGE for an index past the count. */
TP_EXPORT tp_status tp_infer_result_output(const tp_infer_result_t *result, uint32_t index, const char **out_name,
                                           const int64_t **out_shape, uint32_t *out_ndim,
                                           const float **out_values);

/** The export's class names (`torchhost.classes`): how many it holds (0 for NULL or none). A
 *  result names its classes only when this count equals its classifier's number of classes. */
TP_EXPORT uint32_t tp_infer_model_class_count(const tp_infer_model_t *model);

/** The export's name of class `index` (< tp_infer_model_class_count), borrowed until
 *  tp_infer_close; NULL for a NULL model or an index past the count. */
TP_EXPORT const char *tp_infer_model_class_name(const tp_infer_model_t *model, uint32_t index);

/** The model component's id (`org.torchhost.resnet`), borrowed until tp_infer_close; NULL for NULL. */
TP_EXPORT const char *tp_infer_model_component(const tp_infer_model_t *model);

/** The export's metadata entry `key` (docs/predict.md, "host export"'s key table:
 *  "torchhost.preprocessing", "torchhost.model", "torchhost.outputs", "torchhost.version", ...),
 *  as the file holds it (JSON for the structured entries), borrowed until tp_infer_close; NULL for
 *  a NULL argument or a key the export does not hold. */
TP_EXPORT const char *tp_infer_model_metadata(const tp_infer_model_t *model, const char *key);

/** The number of metadata entries of the export (0 for NULL), and the key of entry `index` in
 *  byte order (borrowed until tp_infer_close; NULL past the count): to list them all. */
TP_EXPORT uint32_t tp_infer_model_metadata_count(const tp_infer_model_t *model);
TP_EXPORT const char *tp_infer_model_metadata_key(const tp_infer_model_t *model, uint32_t index);

/** This library's build in one line (static storage), as tp::infer::version(): "torchhost <git
 *  describe>; plugin ABI 1.13 (plugins of ABI 1.0 to 1.13 load); LibTorch 2.13.0". */
TP_EXPORT const char *tp_infer_version(void);

/** The number of best classes kept for row `image` of the result (a row, not the call's list
 *  position once images were left out: tp_infer_result_row): min(top_k, classes); 0 for a NULL
 *  result, a row past the result, a model without classification output (`logits` or
 *  `*_logits`), and a row whose scores hold a NaN (no class is best, as `host predict` writes
 *  argmax -1 and no class for it). 0 therefore does not count rows: the first size of an
 *  output's shape does. */
TP_EXPORT uint32_t tp_infer_result_class_count(const tp_infer_result_t *result, uint32_t image);

/** The `rank`-th best class of `image` (0 = best): its id, its name (borrowed; "" when the export
 *  names no classes) and its softmax probability, as `host predict`'s logits.class and
 *  logits.prob (its own sigmoid for a model trained with a binary cross entropy: multi-label).
 *  Any out pointer may be NULL. TP_ERR_INVALID_ARGUMENT for a NULL result, TP_ERR_OUT_OF_RANGE
 *  for an image or rank past the result. */
TP_EXPORT tp_status tp_infer_result_class(const tp_infer_result_t *result, uint32_t image, uint32_t rank,
                                          int64_t *out_class, const char **out_name, float *out_probability);

/** Whether tp_infer_run_files and tp_infer_run_encoded leave an image that cannot be read out of
 *  the batch (`skip` non-zero: listed by tp_infer_result_failed, the others answered) or fail the
 *  call naming the first (0, the default), for the calls that begin from now on
 *  (OpenOptions::skip_bad_images). A call none of whose images can be read fails either way.
 *  TP_ERR_INVALID_ARGUMENT for NULL; else TP_OK. */
TP_EXPORT tp_status tp_infer_set_skip_bad_images(tp_infer_model_t *model, int skip);

/** The most pixels (width x height) an image of tp_infer_run_files and tp_infer_run_encoded may
 *  declare to be decoded, for the calls that begin from now on (OpenOptions::max_image_pixels): a
 *  larger one is refused before it is decoded, as an image that cannot be read
 *  (TP_ERR_INVALID_ARGUMENT naming it and this call, or left out under
 *  tp_infer_set_skip_bad_images). 0, the default: the export's own limit, the max_image_pixels of
 *  its torchhost.preprocessing (178956970 unless the run set it). A value only lowers that limit
 *  (one above it keeps the export's): a service taking uploads bounds what one costs (a 531 KB
 *  PNG of 13000 x 13000 decodes to 507 MB). TP_ERR_INVALID_ARGUMENT for NULL or a value above
 *  INT64_MAX; else TP_OK. */
TP_EXPORT tp_status tp_infer_set_max_image_pixels(tp_infer_model_t *model, uint64_t pixels);

/** The position in the call's list of row `row` of every output and of the `image` of
 *  tp_infer_result_class: `row` itself unless images were left out; -1 for NULL or a row past
 *  the result. */
TP_EXPORT int64_t tp_infer_result_row(const tp_infer_result_t *result, uint32_t row);

/** The number of images left out of `result` because they could not be read (0 for NULL). */
TP_EXPORT uint32_t tp_infer_result_failed_count(const tp_infer_result_t *result);

/** Left-out image `index` (< tp_infer_result_failed_count), in list order: its position in the
 *  call's list and why ("image <i> ('<path>'): ...", borrowed from `result`). Either out pointer
 *  may be NULL. TP_ERR_INVALID_ARGUMENT for a NULL result, TP_ERR_OUT_OF_RANGE for an index past
 *  the count. */
TP_EXPORT tp_status tp_infer_result_failed(const tp_infer_result_t *result, uint32_t index, int64_t *out_image,
                                           const char **out_message);

#ifdef __cplusplus
}
#endif

#endif /* TP_INFER_INFER_H */
