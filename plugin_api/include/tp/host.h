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
#define TP_SERVICE_DIST_V2 "tp.dist/2" /* @since 1.14; an older host answers NULL */

/** "tp.dist/1": the process's place in a distributed run. Read-only; plugins never create
 *  process groups: the host owns them. Values are fixed for the life of the process. */
typedef struct tp_dist_v1_t {
  uint32_t struct_size;
  int32_t rank;             /* global rank, 0 when not distributed */
  int32_t world_size;       /* 1 when not distributed */
  int32_t local_rank;
  int32_t local_world_size;
  /* Collectives (all_reduce, all_gather with gradient) are in tp_dist_v2_t ("tp.dist/2", ABI
   * 1.14), which starts with these same members. */
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

/* Reductions of tp_dist_v2_t.all_reduce (@since 1.14). */
enum {
  TP_REDUCE_SUM = 0,  /* the sum over ranks */
  TP_REDUCE_MEAN = 1, /* the sum divided by world_size; floating tensors only */
  TP_REDUCE_MAX = 2   /* the elementwise maximum over ranks */
};

/** "tp.dist/2" (@since 1.14): the process's place (the members of tp_dist_v1_t, in the same
 *  order) and two collectives on the host's own process group (NCCL for CUDA tensors, Gloo on
 *  the CPU), for Tier T plugins: a SimCLR or MoCo loss gathers its negatives from every rank, a
 *  DINO loss averages its centre. Plugins still never create process groups (PLG-22).
 *
 *  Every function is [main]: called from the host's calls into the plugin (forward, the loss, a
 *  model's after_optimizer_step), never from a plugin's own thread or a loader worker. Errors follow PLG-7 with one twist: the
 *  host has already recorded the message (as fail() does), so the plugin returns the code it got
 *  without calling fail() again, which would replace the message.
 *
 *  Collective (PLG-22): in a data-parallel training step, a call waits for the same call on every
 *  rank. Every rank must make the same calls, in the same order and with the same reductions, in
 *  every training forward (model or loss): the first call on one rank meets the first call on the
 *  others, so a call only some ranks make hangs until dist.timeout_s and then stops the run.
 *  Calling it in every training forward of the loss, unconditionally, is the safe pattern; a
 *  model's after_optimizer_step (model.h), which every rank runs at the same step, is the other
 *  place (a DINO centre folded in once per step).
 *
 *  Local (the identity on this rank's tensor, nothing sent), always, in these cases:
 *  - a single process (world_size 1): no process group is needed, all_gather returns the input
 *    itself and all_reduce leaves the tensor as it is (SUM, MEAN and MAX of one rank);
 *  - evaluations (the run's, the sanity check before training, `host eval`) and `host predict`:
 *    their shards hold different numbers of batches per rank (every sample is evaluated once,
 *    unpadded) and a rank may stop early, so no collective can be matched there; a loss that
 *    gathers negatives reports val/loss with this rank's negatives only;
 *  - `host plugins check`, `host verify` and every other command that trains nothing.
 *  A command that joined no process group while the launcher said world_size > 1 does not
 *  occur; should it, a call fails with TP_ERR_UNSUPPORTED rather than pretend to be alone.
 *
 *  CUDA graphs (run.cuda_graphs, docs/cuda_graphs.md): the host captures the training step only
 *  in a single process, where both functions are the identity and capture as nothing; a run of
 *  several processes is never captured, so no collective is ever inside a graph.
 *
 *  An older host (ABI < 1.14) answers NULL from get_service(host, TP_SERVICE_DIST_V2): such a
 *  plugin either refuses in create() or falls back to tp.dist/1 and local negatives. */
typedef struct tp_dist_v2_t {
  uint32_t struct_size;     /* = sizeof(tp_dist_v2_t) as compiled by the host */
  int32_t rank;             /* global rank, 0 when not distributed */
  int32_t world_size;       /* 1 when not distributed */
  int32_t local_rank;
  int32_t local_world_size;

  /** [main] Replaces `tensor` (borrowed) in place by its reduction over ranks (`op`:
   *  TP_REDUCE_SUM, TP_REDUCE_MEAN or TP_REDUCE_MAX). Any shape; the same shape and dtype on every
   *  rank. Floating or integer dtype (MEAN: floating only). On the process group's device (a CUDA
   *  tensor on cuda:LOCAL_RANK under NCCL, a CPU tensor under Gloo); a tensor elsewhere is refused.
   *  No gradient: the tensor must not require grad (compute it under no_grad, or detach it).
   *  This is for statistics, such as DINO's centre (the batch mean of the teacher's outputs,
   *  averaged over ranks before the centre's moving average). Waits for the result (on CUDA the
   *  current stream waits; the CPU does not). Returns TP_OK, TP_ERR_INVALID_ARGUMENT (NULL, a tensor
   *  that requires grad, an unknown op, MEAN of integers, the wrong device) or TP_ERR_DEVICE (the
   *  collective failed: a rank was lost, or dist.timeout_s passed). */
  tp_status (*all_reduce)(const struct tp_host_t *host, tp_tensor tensor, int32_t op);

  /** [main] Writes into *out a new reference (release with host->tensor_release) to every rank's
   *  `input` (borrowed) concatenated along dim 0 in rank order, on `input`'s device:
   *  [N_0 + N_1 + ..., ...] for rank r's input [N_r, ...], and into *out_own_offset (when not
   *  NULL) where this rank's rows start in it: N_0 + ... + N_(r-1), or 0 when the call is local
   *  (the result is then `input` alone). Find a local row's partner in the result by this
   *  offset, never by rank x N: it holds for local calls and for ranks with other counts. The row
   *  counts N_r may differ between ranks (a batch with skipped samples; a batch with none left
   *  runs no forward, so the host stops that rank with the reason); the sizes past dim 0 and
   *  the dtype must not: every rank then fails with the same TP_ERR_INVALID_ARGUMENT message
   *  naming both shapes, instead of waiting. `input` has at least one dim (at most 8). Costs two
   *  collectives (the shapes, then the rows, padded to the longest rank's count); the shapes are
   *  read on the host, so on CUDA each call costs one device sync (the host's, not a PLG-11 breach).
   *  Differentiable: when `input` requires grad, the result does, and backward hands this rank's
   *  `input` the sum over ranks of the gradient of its own rows in every rank's result
   *  (torch.distributed.nn.functional.all_gather, Lightning's all_gather(sync_grads=True)). That
   *  backward is a collective too (one all-reduce of the result's gradient): every rank's loss
   *  must depend on its result, so that every rank's backward reaches it. With the host's
   *  data-parallel gradient average, a loss summed over this rank's anchors against the gathered
   *  candidates then trains exactly as one process on the global batch. `*out` is NULL on
   *  error. Errors as all_reduce. */
  tp_status (*all_gather)(const struct tp_host_t *host, tp_tensor input, tp_tensor *out, int64_t *out_own_offset);
} tp_dist_v2_t;

TP_EXTERN_C_END

#endif /* TP_HOST_H */
