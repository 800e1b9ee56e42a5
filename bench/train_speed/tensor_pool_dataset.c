/* tensor_pool_dataset: the benchmarks' in-memory dataset (Tier S, plain C11, no LibTorch).
 *
 * Component org.torchhost.bench.tensor_pool: a pool of ready-made samples held in memory, handed
 * out without a copy, so that what a training-speed benchmark times is the training step and not
 * image decoding or augmentation. Sample i is pool entry i % pool_size:
 *   image  float32 [channels, image_size, image_size]
 *   label  int64   []            in [0, num_classes)
 * The pool comes from `path`, a raw file written by bench/train_speed/make_tensors.py (all images
 * as float32, then all labels as int64, both C order; the Python and bare C++ loops read the same
 * file, so all three train on the same tensors), or, when `path` is "", from a seeded generator
 * (`pool` samples; the GPU benchmark uses this so it needs no file).
 *
 * What is left for the host per sample: two small malloc'd DLPack headers that point into the
 * pool (the pool is reference counted, so a batch outliving destroy() stays valid, PLG-13). The
 * loader then stacks a batch (one memcpy of batch x sample bytes): the only data cost left, and
 * the host's throughput meter reports it as time/data_wait_s. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp/tp.h"

#define POOL_ID "org.torchhost.bench.tensor_pool"

static const tp_host_t *g_host = NULL;

static tp_status fail(const tp_host_t *host, tp_status code, const char *message) {
  if (host != NULL && host->fail != NULL) return host->fail(host, code, message);
  return code;
}

/* splitmix64: the synthetic pool's generator. */
static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* ---- The shared pool ---- */

typedef struct pool {
  atomic_long refs; /* the dataset instance plus every live view */
  float *images;
  int64_t *labels;
  uint64_t count;
  int64_t sample_elems; /* channels * image_size^2 */
} pool;

static void pool_release(pool *p) {
  if (p != NULL && atomic_fetch_sub(&p->refs, 1) == 1) {
    free(p->images);
    free(p->labels);
    free(p);
  }
}

/* One field: a DLPack header pointing into the pool; its deleter drops the pool reference. */
typedef struct view {
  DLManagedTensor managed;
  pool *owner;
  int64_t shape[3];
} view;

static void view_delete(DLManagedTensor *self) {
  view *v = NULL;
  if (self == NULL) return;
  v = (view *)self->manager_ctx;
  pool_release(v->owner);
  free(v);
}

static view *view_new(pool *owner, void *data, uint8_t code, uint8_t bits, int32_t ndim, const int64_t *shape) {
  view *v = (view *)calloc(1, sizeof(view));
  int32_t d = 0;
  if (v == NULL) return NULL;
  atomic_fetch_add(&owner->refs, 1);
  v->owner = owner;
  for (d = 0; d < ndim; ++d) v->shape[d] = shape[d];
  v->managed.manager_ctx = v;
  v->managed.deleter = view_delete;
  v->managed.dl_tensor.data = data;
  v->managed.dl_tensor.device.device_type = kDLCPU;
  v->managed.dl_tensor.ndim = ndim;
  v->managed.dl_tensor.dtype.code = code;
  v->managed.dl_tensor.dtype.bits = bits;
  v->managed.dl_tensor.dtype.lanes = 1;
  v->managed.dl_tensor.shape = v->shape;
  v->managed.dl_tensor.strides = NULL; /* compact */
  return v;
}

/* ---- tp.dataset/1 ---- */

typedef struct tensor_pool {
  const tp_host_t *host;
  pool *data;
  uint64_t size;
  int64_t shape[3];
} tensor_pool;

/* Reads `path` into p (count from the file size); returns TP_OK or fails through host. */
static tp_status load_file(const tp_host_t *host, const char *path, int64_t num_classes, pool *p) {
  char message[512];
  FILE *f = fopen(path, "rb");
  long bytes = 0;
  uint64_t per_sample = (uint64_t)p->sample_elems * 4u + 8u, i = 0;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (bytes = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    if (f != NULL) fclose(f);
    snprintf(message, sizeof message, "tensor_pool: cannot read '%s' (make it with bench/train_speed/make_tensors.py)", path);
    return fail(host, TP_ERR_IO, message);
  }
  if (bytes == 0 || (uint64_t)bytes % per_sample != 0) {
    fclose(f);
    snprintf(message, sizeof message,
             "tensor_pool: '%s' has %ld bytes, not a multiple of one sample (%llu bytes): channels or image_size differ from the file's",
             path, bytes, (unsigned long long)per_sample);
    return fail(host, TP_ERR_CONFIG, message);
  }
  p->count = (uint64_t)bytes / per_sample;
  p->images = (float *)malloc(p->count * (uint64_t)p->sample_elems * 4u);
  p->labels = (int64_t *)malloc(p->count * 8u);
  if (p->images == NULL || p->labels == NULL) {
    fclose(f);
    return fail(host, TP_ERR_OUT_OF_MEMORY, "tensor_pool: out of memory for the pool");
  }
  if (fread(p->images, 4u * (size_t)p->sample_elems, p->count, f) != p->count || fread(p->labels, 8u, p->count, f) != p->count) {
    fclose(f);
    snprintf(message, sizeof message, "tensor_pool: short read from '%s'", path);
    return fail(host, TP_ERR_IO, message);
  }
  fclose(f);
  for (i = 0; i < p->count; ++i)
    if (p->labels[i] < 0 || p->labels[i] >= num_classes) {
      snprintf(message, sizeof message, "tensor_pool: label %lld of sample %llu in '%s' is outside [0, num_classes = %lld)",
               (long long)p->labels[i], (unsigned long long)i, path, (long long)num_classes);
      return fail(host, TP_ERR_CONFIG, message);
    }
  return TP_OK;
}

/* Fills p with `count` samples: images uniform in [-1, 1), labels uniform over the classes. */
static tp_status generate(const tp_host_t *host, int64_t count, int64_t num_classes, uint64_t seed, pool *p) {
  uint64_t i = 0, n = 0;
  p->count = (uint64_t)count;
  n = p->count * (uint64_t)p->sample_elems;
  p->images = (float *)malloc(n * 4u);
  p->labels = (int64_t *)malloc(p->count * 8u);
  if (p->images == NULL || p->labels == NULL) return fail(host, TP_ERR_OUT_OF_MEMORY, "tensor_pool: out of memory for the pool");
  for (i = 0; i < n; ++i) p->images[i] = (float)(mix64(seed ^ i) >> 40) / 8388608.0f - 1.0f;
  for (i = 0; i < p->count; ++i) p->labels[i] = (int64_t)(mix64(~seed ^ i) % (uint64_t)num_classes);
  return TP_OK;
}

static tp_status tp_create(const tp_host_t *host, const tp_config_t *cfg, const char *split, void **out_self) {
  const char *path = NULL;
  int64_t size = 0, pool_size = 0, channels = 0, image_size = 0, classes = 0, seed = 0;
  tensor_pool *self = NULL;
  tp_status status = TP_OK;
  if (out_self == NULL || cfg == NULL || split == NULL)
    return fail(host, TP_ERR_INVALID_ARGUMENT, "tensor_pool: create needs cfg, split and out_self");
  *out_self = NULL;
  if (cfg->get_string(cfg->self, "path", &path) != TP_OK || cfg->get_int(cfg->self, "size", &size) != TP_OK ||
      cfg->get_int(cfg->self, "pool", &pool_size) != TP_OK || cfg->get_int(cfg->self, "channels", &channels) != TP_OK ||
      cfg->get_int(cfg->self, "image_size", &image_size) != TP_OK ||
      cfg->get_int(cfg->self, "num_classes", &classes) != TP_OK || cfg->get_int(cfg->self, "seed", &seed) != TP_OK)
    return fail(host, TP_ERR_CONFIG, "tensor_pool: cannot read its config keys");
  if (size < 1 || pool_size < 1 || channels < 1 || image_size < 1 || classes < 1)
    return fail(host, TP_ERR_CONFIG, "tensor_pool: size, pool, channels, image_size and num_classes must be positive");
  self = (tensor_pool *)calloc(1, sizeof(tensor_pool));
  if (self == NULL) return fail(host, TP_ERR_OUT_OF_MEMORY, "tensor_pool: out of memory");
  self->data = (pool *)calloc(1, sizeof(pool));
  if (self->data == NULL) {
    free(self);
    return fail(host, TP_ERR_OUT_OF_MEMORY, "tensor_pool: out of memory");
  }
  atomic_init(&self->data->refs, 1);
  self->data->sample_elems = channels * image_size * image_size;
  status = path[0] != '\0' ? load_file(host, path, classes, self->data)
                           : generate(host, pool_size, classes, (uint64_t)seed, self->data);
  if (status != TP_OK) {
    pool_release(self->data);
    free(self);
    return status;
  }
  self->host = host;
  self->size = (uint64_t)size;
  self->shape[0] = channels;
  self->shape[1] = image_size;
  self->shape[2] = image_size;
  *out_self = self;
  return TP_OK;
}

static void tp_destroy(void *self_) {
  tensor_pool *self = (tensor_pool *)self_;
  if (self == NULL) return;
  pool_release(self->data); /* live views keep the pool until their deleters run */
  free(self);
}

static tp_status tp_size(const void *self, uint64_t *out_count) {
  if (self == NULL || out_count == NULL) return fail(g_host, TP_ERR_INVALID_ARGUMENT, "tensor_pool: size needs self and out_count");
  *out_count = ((const tensor_pool *)self)->size;
  return TP_OK;
}

static tp_status tp_get_sample(const void *self_, uint64_t index, const tp_worker_ctx_t *ctx, tp_field_t *out_fields,
                               uint32_t capacity, uint32_t *out_count) {
  const tensor_pool *self = (const tensor_pool *)self_;
  uint64_t k = 0;
  view *image = NULL, *label = NULL;
  (void)ctx;
  if (self == NULL || out_fields == NULL || out_count == NULL)
    return fail(g_host, TP_ERR_INVALID_ARGUMENT, "tensor_pool: get_sample needs self and outputs");
  *out_count = 0;
  if (index >= self->size) return fail(self->host, TP_ERR_OUT_OF_RANGE, "tensor_pool: index out of range");
  if (capacity < 2) return fail(self->host, TP_ERR_INVALID_ARGUMENT, "tensor_pool: capacity < 2 fields");
  k = index % self->data->count;
  image = view_new(self->data, self->data->images + k * (uint64_t)self->data->sample_elems, kDLFloat, 32, 3, self->shape);
  label = view_new(self->data, self->data->labels + k, kDLInt, 64, 0, NULL);
  if (image == NULL || label == NULL) {
    if (image != NULL) view_delete(&image->managed);
    if (label != NULL) view_delete(&label->managed);
    return fail(self->host, TP_ERR_OUT_OF_MEMORY, "tensor_pool: out of memory");
  }
  out_fields[0].name = "image";
  out_fields[0].tensor = &image->managed;
  out_fields[1].name = "label";
  out_fields[1].tensor = &label->managed;
  *out_count = 2;
  return TP_OK;
}

/* ---- Descriptor and entry ---- */

static const tp_config_key_t k_keys[] = {
    {sizeof(tp_config_key_t), "path", TP_CFG_STRING, "\"\"", "raw pool file from make_tensors.py; \"\" = generate `pool` samples"},
    {sizeof(tp_config_key_t), "size", TP_CFG_INT, "10000", "samples per epoch (sample i is pool entry i % pool size)"},
    {sizeof(tp_config_key_t), "pool", TP_CFG_INT, "256", "generated pool size (when path is \"\")"},
    {sizeof(tp_config_key_t), "channels", TP_CFG_INT, "3", "image channels"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "64", "image height and width"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "10", "labels are in [0, num_classes)"},
    {sizeof(tp_config_key_t), "seed", TP_CFG_INT, "1", "generator seed (when path is \"\")"},
};

static const tp_descriptor_t k_descriptor = {
    .struct_size = sizeof(tp_descriptor_t),
    .id = POOL_ID,
    .kind = TP_KIND_DATASET,
    .tier = TP_TIER_S,
    .version = "1.0.0",
    .description = "benchmark data: an in-memory pool of image/label samples handed out without a copy",
    .keys = k_keys,
    .key_count = sizeof k_keys / sizeof k_keys[0],
    .examples = NULL,
    .example_count = 0,
    .flags = 0, /* get_sample only reads the immutable pool */
};

static const tp_dataset_v1_t k_dataset = {
    .struct_size = sizeof(tp_dataset_v1_t),
    .create = tp_create,
    .destroy = tp_destroy,
    .size = tp_size,
    .get_sample = tp_get_sample,
    .set_epoch = NULL,
};

static tp_status entry_init(const tp_host_t *host) {
  g_host = host;
  return TP_OK;
}

static void entry_deinit(void) { g_host = NULL; }

static uint32_t entry_descriptor_count(void) { return 1; }

static const tp_descriptor_t *entry_descriptor_at(uint32_t index) { return index == 0 ? &k_descriptor : NULL; }

static const void *entry_get_interface(const char *component_id, const char *interface_id) {
  if (component_id == NULL || interface_id == NULL) return NULL;
  if (strcmp(component_id, POOL_ID) == 0 && strcmp(interface_id, TP_IFACE_DATASET_V1) == 0) return &k_dataset;
  return NULL;
}

static const tp_build_info_t k_build = {sizeof(tp_build_info_t), NULL, -1, TP_BUILD_NOT_TORCH};

TP_EXPORT const tp_plugin_entry_t tp_entry = {
    .struct_size = sizeof(tp_plugin_entry_t),
    .abi = TP_ABI_VERSION_INIT,
    .build = &k_build,
    .name = "bench_tensor_pool",
    .init = entry_init,
    .deinit = entry_deinit,
    .descriptor_count = entry_descriptor_count,
    .descriptor_at = entry_descriptor_at,
    .get_interface = entry_get_interface,
};
