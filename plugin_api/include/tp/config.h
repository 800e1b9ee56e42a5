/* torchhost plugin ABI: a component's configuration, declared and read.
 *
 * Each component declares the keys of its TOML table as an array of tp_config_key_t in its
 * descriptor (entry.h). The host validates the user's table against that schema before the
 * component is created: an unknown key gets a "did you mean" error, a wrong type an error with
 * file:line:column, and every key the user left out receives its declared default. So by the time
 * `create()` runs, every declared key has a value of the declared type, and the getters below
 * fail only for keys the component never declared (a plugin bug).
 *
 * The key `component` is reserved in every component table: it names the component id.
 *
 * Lifecycle: a tp_config_t is borrowed by `create()` and valid only during that call. Copy what
 * you need. */
#ifndef TP_CONFIG_H
#define TP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

/* Value types a key may have (tp_config_key_t.type). */
enum {
  TP_CFG_BOOL = 1,
  TP_CFG_INT = 2,          /* int64_t */
  TP_CFG_FLOAT = 3,        /* double; an integer literal is accepted */
  TP_CFG_STRING = 4,       /* UTF-8 */
  TP_CFG_INT_ARRAY = 5,
  TP_CFG_FLOAT_ARRAY = 6,
  TP_CFG_STRING_ARRAY = 7,
  /* @since 1.2. A string naming a file or directory. Read it with get_string. The host resolves
   * a relative value written in a config file against that file's directory (as it does for
   * plugins.dirs), so `root = "data/train"` beside run.toml works from any working directory; a
   * value from --set or the environment is relative to the working directory, like any shell
   * argument, and reaches the plugin made absolute too. An absolute value, an empty string, a URI
   * ("s3://...") and a default stay as they are. */
  TP_CFG_PATH = 8
};

/** One key of a component's TOML table. Static storage in the plugin. */
typedef struct tp_config_key_t {
  uint32_t struct_size;      /* = sizeof(tp_config_key_t) */
  const char *name;          /* snake_case key name, e.g. "num_classes" */
  int32_t type;              /* TP_CFG_* */
  /* Default as a TOML value literal ("10", "0.5", "\"relu\"", "[1, 2]"), or NULL when the key
   * is required. The host parses it at load time and refuses a plugin whose default does not
   * parse as `type` (rule PLG-6). */
  const char *default_value;
  const char *help;          /* one line shown by `host plugins list --verbose` */
} tp_config_key_t;

/** Read-only view of one component's validated TOML table. Borrowed; valid during create(). */
typedef struct tp_config_t {
  uint32_t struct_size;
  const void *self; /* host data; pass back as the first argument */

  /* [main] Each getter writes the value of `key` to its out-parameter and returns TP_OK, or
   * returns TP_ERR_CONFIG (message recorded) when the key is undeclared or has another type. */
  tp_status (*get_bool)(const void *self, const char *key, bool *out_value);
  tp_status (*get_int)(const void *self, const char *key, int64_t *out_value);
  tp_status (*get_float)(const void *self, const char *key, double *out_value);
  /* *out_value is borrowed, NUL-terminated UTF-8, valid while the view is. */
  tp_status (*get_string)(const void *self, const char *key, const char **out_value);
  /* Arrays: *out_count receives the length; elements are read with the *_at getters. */
  tp_status (*get_array_size)(const void *self, const char *key, uint32_t *out_count);
  tp_status (*get_int_at)(const void *self, const char *key, uint32_t index, int64_t *out_value);
  tp_status (*get_float_at)(const void *self, const char *key, uint32_t index, double *out_value);
  tp_status (*get_string_at)(const void *self, const char *key, uint32_t index,
                             const char **out_value);
} tp_config_t;

TP_EXTERN_C_END

#endif /* TP_CONFIG_H */
