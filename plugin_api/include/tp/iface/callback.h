/* torchhost plugin ABI, Tier S: callbacks ("tp.callback/1").
 *
 * A callback observes the training run through read-only events and may ask the host to stop,
 * to save a checkpoint, or to log a line. It never gets mutable access to trainer state. Under
 * distributed training every rank receives the same events, and the host combines the requests
 * of all ranks (a stop requested on any rank stops every rank), so a callback cannot hang a run.
 *
 * Lifecycle: create -> on_event()... -> destroy.
 *
 * Which events honour which requests ("window boundary": the end of an optimizer step, where the
 * host already makes one small all-reduce per step and carries deferred requests in it, so no
 * event costs an extra collective per step):
 *
 *   event              TP_REQUEST_STOP                      TP_REQUEST_SAVE (last.pt at the position)
 *   FIT_BEGIN          after the first optimizer step       after the first optimizer step
 *   EPOCH_BEGIN        after the epoch's first step         after the epoch's first step
 *   STEP_BEGIN         after this optimizer step            after this optimizer step
 *   STEP_END           now (no further step)                now
 *   EVAL_END           after this evaluation                after this evaluation
 *   EPOCH_END          after this epoch                     after this epoch
 *   CHECKPOINT_SAVE,   after the next optimizer step        ignored (a save answering a save
 *   CHECKPOINT_LOAD                                         would repeat forever)
 *   FIT_END, EXCEPTION ignored (the run is over)            ignored
 *
 * A deferred request with no optimizer step left to run is dropped. CHECKPOINT_SAVE is seen on
 * rank 0 only (the writer); its stop request still stops every rank. */
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
  TP_EVENT_STEP_BEGIN = 5,    /* at the start of each optimizer step (accumulation window) */
  TP_EVENT_STEP_END = 6,      /* only on logging steps (train.log_every_steps), where the host
                                 reads the loss anyway: scalars "train/loss" and "lr" */
  TP_EVENT_EVAL_END = 7,      /* scalars: "val/loss", "val/<metric>" */
  TP_EVENT_CHECKPOINT_SAVE = 8,
  TP_EVENT_CHECKPOINT_LOAD = 9,
  TP_EVENT_EXCEPTION = 10
};

/* Requests a callback can return (bit set in *out_requests). */
enum {
  TP_REQUEST_NONE = 0,
  TP_REQUEST_STOP = 1u << 0, /* finish the current step, stop (the run's final save follows;
                                inside an epoch the save is at that batch, and --resume auto
                                trains the epoch's remaining batches, as after train.max_time) */
  TP_REQUEST_SAVE = 1u << 1  /* write checkpoints/last.pt; when: the table above */
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
