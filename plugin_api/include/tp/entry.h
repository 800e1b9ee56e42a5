/* torchhost plugin ABI: the one symbol a plugin library exports, and its descriptors.
 *
 * A plugin library (`<name>.so`) exports exactly one data symbol, `tp_entry` (PLG-1); a version
 * script hides everything else. Lifecycle, in the order the host drives it:
 *   1. dlopen with RTLD_NOW | RTLD_LOCAL; resolve `tp_entry`.
 *   2. Negotiate: refuse unless tp_abi_is_compatible(host ABI, tp_entry.abi) (PLG-3).
 *   3. Tier T components: compare `tp_entry.build` with the host's LibTorch fingerprint.
 *   4. init(host). On failure nothing else is called and the library is unloaded.
 *   5. Enumerate descriptors; look up interface tables by (component id, interface id).
 *   6. Create / use / destroy components (see tp/iface/).
 *   7. deinit(), once every object the library created is destroyed and every DLPack deleter
 *      it handed out has run (PLG-13); then dlclose.
 *
 * Rationale: a data symbol (not a function) lets the host read the ABI version before it calls
 * any plugin function, so a plugin built for another ABI is refused before init() or any entry
 * of its tables runs. dlopen itself does run the library's static initialisers (C++ globals,
 * __attribute__((constructor))) before the host can read anything: keep them free of work that
 * needs the host or a particular ABI, since they run even for a library that is then refused. */
#ifndef TP_ENTRY_H
#define TP_ENTRY_H

#include <stddef.h> /* NULL, for TP_STABLE_BUILD_INFO_INIT */
#include <stdint.h>

#include "tp/config.h"
#include "tp/host.h"
#include "tp/macros.h"
#include "tp/status.h"
#include "tp/version.h"

TP_EXTERN_C_BEGIN

/* Component kinds (tp_descriptor_t.kind). */
enum {
  TP_KIND_DATASET = 1,  /* Tier S, "tp.dataset/1" */
  TP_KIND_CALLBACK = 2, /* Tier S, "tp.callback/1" */
  TP_KIND_MODEL = 3,    /* Tier T, "tp.model/1" */
  TP_KIND_LOSS = 4,     /* Tier T, "tp.loss/1" */
  TP_KIND_METRIC = 5,   /* Tier T, "tp.metric/1" */
  TP_KIND_BATCH_TRANSFORM = 6 /* Tier T, "tp.batch_transform/1"; @since 1.3 */
};

/* ABI tiers (tp_descriptor_t.tier). */
enum {
  TP_TIER_S = 1, /* stable: no LibTorch in the plugin; tensors cross as DLPack */
  TP_TIER_T = 2  /* torch-coupled: shares the host's LibTorch, fingerprint-checked */
};

/* Device kinds for tp_build_info_t.device_build. */
enum { TP_BUILD_NOT_TORCH = 0, TP_BUILD_CPU = 1, TP_BUILD_CUDA = 2 };

/** What the plugin was compiled against. Static storage. The host compares it with its own build
 *  for every library that holds a Tier T component and refuses a mismatch, since Tier T objects
 *  share C++ types (at::Tensor) with the host. */
typedef struct tp_build_info_t {
  uint32_t struct_size;      /* = sizeof(tp_build_info_t) */
  const char *torch_version; /* TORCH_VERSION string ("2.13.0"), or NULL for a Tier S library */
  int32_t cxx11_abi;         /* _GLIBCXX_USE_CXX11_ABI (0 or 1), or -1 when not applicable */
  int32_t device_build;      /* TP_BUILD_* of the LibTorch it was built with */
} tp_build_info_t;

/* The build info of a Tier S library (no LibTorch), for C and C++ alike (PLG-4):
 *   static const tp_build_info_t k_build = TP_STABLE_BUILD_INFO_INIT;
 * Tier T libraries use TP_TORCH_BUILD_INFO_INIT (tp/cpp/tensor.h), which needs LibTorch. */
#ifdef __cplusplus
#define TP_STABLE_BUILD_INFO_INIT {sizeof(tp_build_info_t), nullptr, -1, TP_BUILD_NOT_TORCH}
#else
#define TP_STABLE_BUILD_INFO_INIT {sizeof(tp_build_info_t), NULL, -1, TP_BUILD_NOT_TORCH}
#endif

/** One per-sample input a model can be exercised with (`host plugins check`, profiling).
 *  Static storage. */
typedef struct tp_example_input_t {
  uint32_t struct_size;
  const char *name;     /* batch field name, e.g. "image" */
  int32_t dtype;        /* TP_DTYPE_* (iface/model.h) */
  int32_t ndim;         /* number of used entries in `shape`, at most 8 */
  int64_t shape[8];     /* per-sample shape, batch dimension excluded */
  int64_t class_count;  /* for integer label fields: values are drawn from [0, class_count) */
} tp_example_input_t;

/** Describes one component. Static storage in the plugin; valid until deinit(). */
typedef struct tp_descriptor_t {
  uint32_t struct_size;        /* = sizeof(tp_descriptor_t) */
  const char *id;              /* reverse-DNS, unique across all loaded plugins ("org.example.resnet") */
  int32_t kind;                /* TP_KIND_* */
  int32_t tier;                /* TP_TIER_*; must match the kind */
  const char *version;         /* the component's own semantic version, "1.2.0" */
  const char *description;     /* one line */
  const tp_config_key_t *keys; /* the config schema; may be NULL when key_count is 0 */
  uint32_t key_count;
  /* Example per-sample fields (model inputs and loss targets) for checks and profiling; may be
   * NULL. Datasets leave it NULL. */
  const tp_example_input_t *examples;
  uint32_t example_count;
  uint32_t flags; /* TP_DESCRIPTOR_* below */
} tp_descriptor_t;

enum {
  /* Datasets: get_sample is not thread-safe; the host calls it from one worker at a time. */
  TP_DESCRIPTOR_SERIAL = 1u << 0
};

typedef struct tp_plugin_entry_t {
  uint32_t struct_size;          /* = sizeof(tp_plugin_entry_t) */
  tp_version_t abi;              /* TP_ABI_VERSION_INIT as compiled */
  const tp_build_info_t *build;  /* static storage; never NULL */
  const char *name;              /* plugin (library) name; equals the .so base name */

  /** [main] First call after negotiation; `host` is borrowed until deinit(). Returns TP_OK or
   *  an error through host->fail(); on error the host calls nothing else. */
  tp_status (*init)(const tp_host_t *host);
  /** [main] Last call. Every object this library created has been destroyed. May be NULL. */
  void (*deinit)(void);  // NOLINT(modernize-redundant-void-arg): C11 needs (void) for "no arguments"
  /** [any] Number of components in this library. */
  uint32_t (*descriptor_count)(void);  // NOLINT(modernize-redundant-void-arg): as above
  /** [any] Borrowed descriptor, valid until deinit(); NULL when index >= descriptor_count(). */
  const tp_descriptor_t *(*descriptor_at)(uint32_t index);
  /** [any] Static interface table for (component id, interface id such as "tp.model/1"), or
   *  NULL when unsupported. The table's first member is its struct_size. */
  const void *(*get_interface)(const char *component_id, const char *interface_id);
} tp_plugin_entry_t;

/** The name the host resolves. */
#define TP_ENTRY_SYMBOL "tp_entry"

/** Defined by every plugin library (C: `TP_EXPORT const tp_plugin_entry_t tp_entry = {...};`,
 *  C++: TP_DEFINE_PLUGIN in tp/cpp/plugin.h). */
TP_EXPORT extern const tp_plugin_entry_t tp_entry;

TP_EXTERN_C_END

#endif /* TP_ENTRY_H */
