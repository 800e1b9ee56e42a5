/* The C API from C11 (tp/infer/infer.h must compile as C): the calls infer_test.cpp checks. */
#include <stddef.h>
#include <string.h>

#include "tp/infer/infer.h"

/* Opens `export_file`, classifies `count` files with the best class kept, copies each image's class
 * id and probability and the first logit row's values (up to `logits_capacity`), closes. Returns
 * the first failing status (the message in tp_infer_last_error()). */
tp_status infer_c_classify(const char *export_file, const char *plugin_dir, const char *const *paths, uint32_t count,
                           int64_t *out_classes, float *out_probabilities, float *out_logits,
                           uint32_t logits_capacity) {
  tp_infer_model_t *model = NULL;
  tp_infer_result_t *result = NULL;
  tp_status status = tp_infer_open(export_file, "cpu", plugin_dir, &model);
  if (status == TP_OK) status = tp_infer_run_files(model, paths, count, 1, &result);
  for (uint32_t image = 0; status == TP_OK && image < count; ++image) {
    if (tp_infer_result_class_count(result, image) != 1) status = TP_ERR_INTERNAL;
    else status = tp_infer_result_class(result, image, 0, &out_classes[image], NULL, &out_probabilities[image]);
  }
  const char *name = NULL;
  const int64_t *shape = NULL;
  uint32_t ndim = 0;
  const float *values = NULL;
  if (status == TP_OK) status = tp_infer_result_output(result, 0, &name, &shape, &ndim, &values);
  if (status == TP_OK) {
    const uint32_t n = ndim == 2 && (uint64_t)(shape[0] * shape[1]) <= logits_capacity
                           ? (uint32_t)(shape[0] * shape[1]) : 0;
    memcpy(out_logits, values, n * sizeof(float));
    if (n == 0 || strcmp(name, "logits") != 0) status = TP_ERR_INTERNAL;
  }
  tp_infer_result_free(result);
  tp_infer_close(model);
  return status;
}

/* tp_infer_open on `path`: the status, and *out_model left NULL on failure. */
tp_status infer_c_open_fails(const char *path, const char *plugin_dir, int *out_model_is_null) {
  tp_infer_model_t *model = (tp_infer_model_t *)&model; /* anything but NULL */
  const tp_status status = tp_infer_open(path, NULL, plugin_dir, &model);
  *out_model_is_null = model == NULL;
  tp_infer_close(model);
  return status;
}

/* One image's bytes through tp_infer_run_encoded: its best class id and probability. */
tp_status infer_c_encoded(const char *export_file, const char *plugin_dir, const uint8_t *bytes, uint64_t size,
                          int64_t *out_class, float *out_probability) {
  tp_infer_model_t *model = NULL;
  tp_infer_result_t *result = NULL;
  const uint8_t *const images[] = {bytes};
  tp_status status = tp_infer_open(export_file, "cpu", plugin_dir, &model);
  if (status == TP_OK) status = tp_infer_run_encoded(model, images, &size, 1, 1, &result);
  if (status == TP_OK) status = tp_infer_result_class(result, 0, 0, out_class, NULL, out_probability);
  tp_infer_result_free(result);
  tp_infer_close(model);
  return status;
}

/* The export's metadata through the C API: its class count, the name of class `index` (copied
 * into `out_name`, "" when NULL), its component (copied into `out_component`), and whether NULL
 * and an index past the count give 0 and NULL. */
tp_status infer_c_metadata(const char *export_file, const char *plugin_dir, uint32_t index, uint32_t *out_count,
                           char *out_name, size_t name_capacity, char *out_component, size_t component_capacity,
                           int *out_nulls_refused) {
  tp_infer_model_t *model = NULL;
  const tp_status status = tp_infer_open(export_file, "cpu", plugin_dir, &model);
  if (status != TP_OK) return status;
  *out_count = tp_infer_model_class_count(model);
  const char *name = tp_infer_model_class_name(model, index);
  strncpy(out_name, name != NULL ? name : "", name_capacity - 1);
  out_name[name_capacity - 1] = '\0';
  strncpy(out_component, tp_infer_model_component(model), component_capacity - 1);
  out_component[component_capacity - 1] = '\0';
  *out_nulls_refused = tp_infer_model_class_count(NULL) == 0 && tp_infer_model_class_name(NULL, 0) == NULL &&
                       tp_infer_model_class_name(model, *out_count) == NULL && tp_infer_model_component(NULL) == NULL &&
                       tp_infer_set_threads(NULL, 1) == TP_ERR_INVALID_ARGUMENT &&
                       tp_infer_set_threads(model, 0x80000000u) == TP_ERR_INVALID_ARGUMENT &&
                       tp_infer_set_threads(model, 1) == TP_OK;
  tp_infer_close(model);
  return TP_OK;
}

/* Whether two results hold the same outputs: names, shapes and values, bit for bit. */
static int same_outputs(const tp_infer_result_t *a, const tp_infer_result_t *b) {
  const uint32_t count = tp_infer_result_output_count(a);
  int same = count > 0 && count == tp_infer_result_output_count(b);
  for (uint32_t i = 0; same && i < count; ++i) {
    const char *name_a = NULL, *name_b = NULL;
    const int64_t *shape_a = NULL, *shape_b = NULL;
    uint32_t ndim_a = 0, ndim_b = 0;
    const float *values_a = NULL, *values_b = NULL;
    same = tp_infer_result_output(a, i, &name_a, &shape_a, &ndim_a, &values_a) == TP_OK &&
           tp_infer_result_output(b, i, &name_b, &shape_b, &ndim_b, &values_b) == TP_OK &&
           strcmp(name_a, name_b) == 0 && ndim_a == ndim_b && memcmp(shape_a, shape_b, ndim_a * sizeof(int64_t)) == 0;
    uint64_t values = 1;
    for (uint32_t d = 0; same && d < ndim_a; ++d) values *= (uint64_t)shape_a[d];
    same = same && memcmp(values_a, values_b, values * sizeof(float)) == 0;
  }
  return same;
}

/* One prepared tensor `data` of shape `shape` (field `name`) through tp_infer_run_tensor and
 * through tp_infer_run_tensors with count 1: whether they answer the same (*out_same). Then
 * tp_infer_run_tensors with a second tensor, the same values named `extra`: its status, whether
 * its result stayed NULL, and its message (copied into `out_message`). */
tp_status infer_c_tensors(const char *export_file, const char *plugin_dir, const char *name, const float *data,
                          const int64_t *shape, uint32_t ndim, const char *extra, int *out_same,
                          tp_status *out_extra_status, int *out_extra_is_null, char *out_message,
                          size_t message_capacity) {
  tp_infer_model_t *model = NULL;
  tp_infer_result_t *one = NULL, *several = NULL;
  tp_infer_result_t *refused = (tp_infer_result_t *)&refused; /* anything but NULL */
  const char *const names[] = {name, extra};
  const float *const inputs[] = {data, data};
  const int64_t *const shapes[] = {shape, shape};
  const uint32_t ndims[] = {ndim, ndim};
  tp_status status = tp_infer_open(export_file, "cpu", plugin_dir, &model);
  if (status == TP_OK) status = tp_infer_run_tensor(model, name, data, shape, ndim, 2, &one);
  if (status == TP_OK) status = tp_infer_run_tensors(model, names, inputs, shapes, ndims, 1, 2, &several);
  if (status == TP_OK) {
    *out_same = same_outputs(one, several) && tp_infer_result_class_count(several, 0) == 2;
    *out_extra_status = tp_infer_run_tensors(model, names, inputs, shapes, ndims, 2, 2, &refused);
    *out_extra_is_null = refused == NULL;
    strncpy(out_message, tp_infer_last_error(), message_capacity - 1);
    out_message[message_capacity - 1] = '\0';
  }
  tp_infer_result_free(one);
  tp_infer_result_free(several);
  tp_infer_close(model);
  return status;
}
