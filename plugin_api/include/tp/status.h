/* torchhost plugin ABI: status codes and log severities.
 *
 * Every fallible plugin function returns a tp_status. TP_OK is zero; anything else is an error
 * whose message the plugin recorded with `host->fail()` before returning (see host.h). The host
 * turns a non-zero status into an error that names the plugin, the component and the function.
 *
 * Rationale: codes are plain int32_t constants, never a C enum type, so the size of the type is
 * fixed by the ABI and new codes can be appended without changing anything that exists. */
#ifndef TP_STATUS_H
#define TP_STATUS_H

#include <stdint.h>

#include "tp/macros.h"

TP_EXTERN_C_BEGIN

typedef int32_t tp_status;

enum {
  TP_OK = 0,
  TP_ERR_INVALID_ARGUMENT = 1, /* a caller passed something the contract forbids */
  TP_ERR_CONFIG = 2,           /* the component's TOML table is unusable */
  TP_ERR_UNSUPPORTED = 3,      /* the request is valid but this component cannot do it */
  TP_ERR_IO = 4,               /* a file or stream failed */
  TP_ERR_OUT_OF_MEMORY = 5,
  TP_ERR_DEVICE = 6,           /* CUDA or another device reported an error */
  TP_ERR_INTERNAL = 7,         /* a bug, or an exception caught by TP_GUARD */
  TP_ERR_OUT_OF_RANGE = 8      /* an index past the end (dataset sample, descriptor) */
};

/* Severities for host->log. */
enum {
  TP_LOG_DEBUG = 0,
  TP_LOG_INFO = 1,
  TP_LOG_WARNING = 2,
  TP_LOG_ERROR = 3,
  /* Used by the host itself when a plugin breaks a rule in plugin_api/README.md. */
  TP_LOG_PLUGIN_MISBEHAVING = 4
};

TP_EXTERN_C_END

#endif /* TP_STATUS_H */
