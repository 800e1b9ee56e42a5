/* old_style_dataset: a Tier S dataset in C11 written in the style of the SDK's docs before DLPack
 * was pinned as tp/dlpack.h (ABI 1.0 to 1.2): it includes <dlpack/dlpack.h> itself, before the
 * torchhost headers, as those docs told plugins to. Component org.example.old_style: `size`
 * samples (default 8) of x float32 [1] = index. tests/package/consumer_build.sh builds it against
 * the installed SDK and checks that <dlpack/dlpack.h> came from the install. Do not modernise the
 * includes: the old style is what this fixture tests. */
#include <dlpack/dlpack.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tp/tp.h"

#define OLD_ID "org.example.old_style"

static const tp_host_t *g_host = NULL;

static tp_status fail(tp_status code, const char *message) {
  if (g_host != NULL && g_host->fail != NULL) return g_host->fail(g_host, code, message);
  return code;
}

typedef struct old_tensor {
  DLManagedTensor managed;
  int64_t shape[1];
  float value;
} old_tensor;

static void old_tensor_delete(DLManagedTensor *self) {
  if (self != NULL) free(self->manager_ctx);
}

typedef struct old_dataset {
  uint64_t count;
} old_dataset;

static tp_status old_create(const tp_host_t *host, const tp_config_t *cfg, const char *split, void **out_self) {
  int64_t size = 0;
  old_dataset *self = NULL;
  (void)host;
  if (out_self == NULL || cfg == NULL || split == NULL) return fail(TP_ERR_INVALID_ARGUMENT, "old_style: bad create");
  *out_self = NULL;
  if (cfg->get_int(cfg->self, "size", &size) != TP_OK || size < 1)
    return fail(TP_ERR_CONFIG, "old_style: size must be at least 1");
  self = (old_dataset *)calloc(1, sizeof(old_dataset));
  if (self == NULL) return fail(TP_ERR_OUT_OF_MEMORY, "old_style: out of memory");
  self->count = (uint64_t)size;
  *out_self = self;
  return TP_OK;
}

static void old_destroy(void *self) { free(self); }

static tp_status old_size(const void *self, uint64_t *out_count) {
  if (self == NULL || out_count == NULL) return fail(TP_ERR_INVALID_ARGUMENT, "old_style: bad size");
  *out_count = ((const old_dataset *)self)->count;
  return TP_OK;
}

static tp_status old_get_sample(const void *self, uint64_t index, const tp_worker_ctx_t *ctx, tp_field_t *out_fields,
                                uint32_t capacity, uint32_t *out_count) {
  old_tensor *x = NULL;
  (void)ctx;
  if (self == NULL || out_fields == NULL || out_count == NULL || capacity < 1)
    return fail(TP_ERR_INVALID_ARGUMENT, "old_style: bad get_sample");
  *out_count = 0;
  if (index >= ((const old_dataset *)self)->count) return fail(TP_ERR_OUT_OF_RANGE, "old_style: index out of range");
  x = (old_tensor *)calloc(1, sizeof(old_tensor));
  if (x == NULL) return fail(TP_ERR_OUT_OF_MEMORY, "old_style: out of memory");
  x->shape[0] = 1;
  x->value = (float)index;
  x->managed.manager_ctx = x;
  x->managed.deleter = old_tensor_delete;
  x->managed.dl_tensor.data = &x->value;
  x->managed.dl_tensor.device.device_type = kDLCPU;
  x->managed.dl_tensor.ndim = 1;
  x->managed.dl_tensor.dtype.code = kDLFloat;
  x->managed.dl_tensor.dtype.bits = 32;
  x->managed.dl_tensor.dtype.lanes = 1;
  x->managed.dl_tensor.shape = x->shape;
  out_fields[0].name = "x";
  out_fields[0].tensor = &x->managed;
  *out_count = 1;
  return TP_OK;
}

static const tp_config_key_t k_keys[] = {
    {sizeof(tp_config_key_t), "size", TP_CFG_INT, "8", "number of samples in every split"},
};

static const tp_descriptor_t k_descriptor = {
    .struct_size = sizeof(tp_descriptor_t),
    .id = OLD_ID,
    .kind = TP_KIND_DATASET,
    .tier = TP_TIER_S,
    .version = "1.0.0",
    .description = "x = index (a plugin in the ABI 1.0-1.2 include style)",
    .keys = k_keys,
    .key_count = 1,
};

static const tp_dataset_v1_t k_dataset = {
    .struct_size = sizeof(tp_dataset_v1_t),
    .create = old_create,
    .destroy = old_destroy,
    .size = old_size,
    .get_sample = old_get_sample,
};

static tp_status entry_init(const tp_host_t *host) {
  g_host = host;
  return TP_OK;
}
static void entry_deinit(void) { g_host = NULL; }
static uint32_t entry_descriptor_count(void) { return 1; }
static const tp_descriptor_t *entry_descriptor_at(uint32_t index) { return index == 0 ? &k_descriptor : NULL; }
static const void *entry_get_interface(const char *component_id, const char *interface_id) {
  if (component_id != NULL && interface_id != NULL && strcmp(component_id, OLD_ID) == 0 &&
      strcmp(interface_id, TP_IFACE_DATASET_V1) == 0)
    return &k_dataset;
  return NULL;
}

static const tp_build_info_t k_build = TP_STABLE_BUILD_INFO_INIT;

TP_EXPORT const tp_plugin_entry_t tp_entry = {
    .struct_size = sizeof(tp_plugin_entry_t),
    .abi = TP_ABI_VERSION_INIT,
    .build = &k_build,
    .name = "old_style_dataset",
    .init = entry_init,
    .deinit = entry_deinit,
    .descriptor_count = entry_descriptor_count,
    .descriptor_at = entry_descriptor_at,
    .get_interface = entry_get_interface,
};
