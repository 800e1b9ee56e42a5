/* torchhost plugin ABI: the services the host lends to every plugin.
 *
 * The host passes a `const tp_host_t *` to `tp_entry.init()` and to every `create()`. It stays
 * valid until `deinit()` returns. Plugins keep the pointer; they never copy the struct.
 *
 * Error protocol (PLG-7): a failing plugin function calls `host->fail(host, code, message)` and
 * returns the code it got back. The host copies the message into storage owned by the calling
 * thread, so the plugin may pass a stack buffer. Plugins never return allocated strings. */
#ifndef TP_HOST_H
#define TP_HOST_H

#include <stdint.h>

#include "tp/macros.h"
#include "tp/status.h"
#include "tp/version.h"

TP_EXTERN_C_BEGIN

/** Tier T tensor handle: an opaque pointer to a heap-allocated `at::Tensor` (AOTI pattern).
 *  It keeps autograd history. Ownership is written on every parameter that carries one. */
typedef struct tp_tensor_opaque *tp_tensor;

/* Service ids for get_service(). */
#define TP_SERVICE_DIST_V1 "tp.dist/1"

/** "tp.dist/1": the process's place in a distributed run. Read-only; plugins never create
 *  process groups: the host owns them. Values are fixed for the life of the process. */
typedef struct tp_dist_v1_t {
  uint32_t struct_size;
  int32_t rank;             /* global rank, 0 when not distributed */
  int32_t world_size;       /* 1 when not distributed */
  int32_t local_rank;
  int32_t local_world_size;
} tp_dist_v1_t;

typedef struct tp_host_t {
  uint32_t struct_size; /* = sizeof(tp_host_t) as compiled by the host */
  tp_version_t abi;     /* the host's ABI version */
  void *host_data;      /* reserved for the host; plugins never touch it */

  /** [any] Records `message` (UTF-8, copied) as the calling thread's last error and returns
   *  `code`, so a plugin writes `return host->fail(host, TP_ERR_IO, "cannot open x.png");`.
   *  `message` may be NULL (the host then reports the code alone). The host prints it inside its
   *  own error message: lines after the first are indented, control characters escaped. */
  tp_status (*fail)(const struct tp_host_t *host, tp_status code, const char *message);

  /** [any] Writes a UTF-8 line to the run's log. `severity` is TP_LOG_DEBUG..TP_LOG_ERROR.
   *  The line is tagged `[plugin <component id>]` when called from inside one of the host's calls
   *  into the plugin (`[plugin <file name>]` during init and deinit), else `[plugin]`.
   *  Rank 0 writes every severity (TP_LOG_DEBUG only with `host --verbose`); every other rank
   *  writes only TP_LOG_ERROR, prefixed with its rank, and drops TP_LOG_WARNING and below (so a
   *  warning every rank would raise is printed once). `message` may be NULL. A message of several
   *  lines is written as several lines, each tagged; control characters other than tab (ESC, BEL,
   *  CR, DEL, the C1 controls) are written as `\u001B`-style escapes, bytes that are not UTF-8
   *  as `\xE9`. */
  void (*log)(const struct tp_host_t *host, int32_t severity, const char *message);

  /** [any] Returns a borrowed, static service table for `service_id` (TP_SERVICE_*), valid
   *  until deinit(), or NULL when the host has no such service. */
  const void *(*get_service)(const struct tp_host_t *host, const char *service_id);

  /** [any] Releases a Tier T tensor handle that the caller owns (a "new reference").
   *  Accepts NULL. Tier S plugins never see tensor handles. */
  void (*tensor_release)(const struct tp_host_t *host, tp_tensor handle);
} tp_host_t;

TP_EXTERN_C_END

#endif /* TP_HOST_H */
