/* torchhost plugin ABI, Tier S: callbacks ("tp.callback/1").
 *
 * A callback observes the training run through read-only events and may ask the host to stop,
 * to save a checkpoint, or to log a line. It never gets mutable access to trainer state. Under
 * distributed training every rank receives the same events, and the host combines the requests
 * of all ranks (a stop requested on any rank stops every rank), so a callback cannot hang a run.
 *
 * Lifecycle: create -> on_event()... -> destroy. */
#ifndef TP_IFACE_CALLBACK_H
#define TP_IFACE_CALLBACK_H

#include <stdint.h>

#include "tp/config.h"
#include "tp/host.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

#define TP_IFACE_CALLBACK_V1 "tp.callback/1"

/* Event kinds (tp_event_t.kind). */
enum {
  TP_EVENT_FIT_BEGIN = 1,
  TP_EVENT_FIT_END = 2,
  TP_EVENT_EPOCH_BEGIN = 3,
  TP_EVENT_EPOCH_END = 4,     /* scalars: train and val figures of the epoch */
  TP_EVENT_STEP_BEGIN = 5,
  TP_EVENT_STEP_END = 6,      /* scalars only on logging steps (reading the loss syncs) */
  TP_EVENT_EVAL_END = 7,      /* scalars: "val/loss", "val/<metric>" */
  TP_EVENT_CHECKPOINT_SAVE = 8,
  TP_EVENT_CHECKPOINT_LOAD = 9,
  TP_EVENT_EXCEPTION = 10
};

/* Requests a callback can return (bit set in *out_requests). */
enum {
  TP_REQUEST_NONE = 0,
  TP_REQUEST_STOP = 1u << 0, /* finish the current step, save, stop */
  TP_REQUEST_SAVE = 1u << 1  /* save a checkpoint after this event */
};

/** A named scalar. Both fields borrowed for the duration of the call. */
typedef struct tp_scalar_t {
  const char *name; /* "train/loss", "val/accuracy", "lr" */
  double value;
} tp_scalar_t;

/** Borrowed for the duration of on_event. */
typedef struct tp_event_t {
  uint32_t struct_size;
  int32_t kind;              /* TP_EVENT_* */
  uint64_t step;             /* optimizer steps taken so far */
  uint64_t epoch;            /* 0-based */
  double lr;                 /* learning rate of the first parameter group */
  const tp_scalar_t *scalars;
  uint32_t scalar_count;
  const char *message;       /* TP_EVENT_EXCEPTION: the error text; checkpoints: the path; else NULL */
} tp_event_t;

typedef struct tp_callback_v1_t {
  uint32_t struct_size; /* = sizeof(tp_callback_v1_t) */
  /** [main] `host` borrowed until deinit(); `cfg` only during the call. */
  tp_status (*create)(const tp_host_t *host, const tp_config_t *cfg, void **out_self);
  /** [main] Accepts NULL. */
  void (*destroy)(void *self);
  /** [main] Observes one event; sets *out_requests to a TP_REQUEST_* mask (host zeroes it). */
  tp_status (*on_event)(void *self, const tp_event_t *event, uint32_t *out_requests);
} tp_callback_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_CALLBACK_H */
