/* torchhost plugin ABI, Tier T: models ("tp.model/1").
 *
 * A model maps named inputs to named outputs. The host passes every field of the batch as an
 * input (the model reads the ones it needs by name, usually configurable), and passes every
 * output on to the loss and the metrics, which again pick by name. So one-input/one-output,
 * one-input/many-output and many-input/many-output models use the same interface.
 *
 * The host owns training: it collects the parameters and buffers through visit_state (for the
 * optimizer, DDP and checkpoints), sets grad mode and autocast before forward, and runs backward.
 * A checkpoint therefore never depends on how the plugin stores its state.
 *
 * Lifecycle: create -> to_device -> visit_state -> [set_activation_checkpointing,
 * layer_depths, set_batchnorm_frozen] -> [check_graph_capture] ->
 * (set_training, forward, [after_optimizer_step once per optimizer step])... -> destroy.
 *
 * Per-step hook (@since 1.14): after_optimizer_step runs once after every optimizer step with the
 * step and the run's total, for a momentum teacher (BYOL, DINO, MoCo) that must move once per step
 * rather than once per forward (which runs per micro-batch under gradient accumulation).
 *
 * Activation checkpointing (@since 1.1): a model may declare blocks whose forward it can run again
 * in backward. When the user sets `[model] activation_checkpointing = true`, the host calls
 * set_activation_checkpointing(self, true); in training-mode forward those blocks then keep only
 * their inputs and recompute their activations during backward (less activation memory, about
 * one more forward pass of time). tp/cpp/activation_checkpoint.h implements such blocks for C++ plugins.
 *
 * Fine-tuning controls (@since 1.4), both optional:
 *  - layer_depths: the model's depth ordering of its parameters (which layer is nearer the input),
 *    for `optim.layer_decay` (timm's layer-wise lr decay: lr x decay^(deepest - depth)).
 *  - set_batchnorm_frozen: keep the batch-normalisation layers in eval mode while the rest trains,
 *    for `[model] freeze_bn_stats = true`.
 * tp/cpp/model_adapter.h implements set_batchnorm_frozen for every torch::nn / TorchScript model
 * and layer_depths for a class that declares one.
 *
 * CUDA graphs (@since 1.8): with `run.cuda_graphs` the host may capture the whole training step
 * (forward, loss, backward, optimizer) as one CUDA graph and replay it; a replay re-runs the
 * recorded kernels on new input values and runs no host code of the model. A model whose forward
 * cannot be recorded that way says so through check_graph_capture; NULL means it can (PLG-18).
 *
 * Rationale (C++ default member initializers on the optional members): Tier T plugins are
 * C++ and usually initialise this table positionally, as the template does. Without the default,
 * such a 1.0 source rebuilt against 1.1 headers trips -Wmissing-field-initializers (an error under
 * -Werror) although leaving the member NULL is exactly right. C sees a plain member; the layout
 * is the same in both languages (tests/abi pins it). */
#ifndef TP_IFACE_MODEL_H
#define TP_IFACE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tp/config.h"
#include "tp/host.h"
#include "tp/iface/tensor.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

#define TP_IFACE_MODEL_V1 "tp.model/1"

/** One entry of a model's depth ordering (tp_model_v1_t.layer_depths). Plain data.
 *  @since 1.4 */
typedef struct tp_layer_depth_t {
  const char *prefix; /* dotted parameter-name prefix, e.g. "layer1.0" or "conv1" */
  uint32_t depth;     /* 0 = nearest the input; entries may share a depth (parallel branches) */
} tp_layer_depth_t;

typedef struct tp_model_v1_t {
  uint32_t struct_size; /* = sizeof(tp_model_v1_t) */

  /** [main] Builds the model on the CPU in fp32 with its own initialisation; the host seeds the
   *  global generator before the call, so initialisation is reproducible. `host` borrowed until
   *  deinit(); `cfg` only during the call. *out_self is released with destroy(). */
  tp_status (*create)(const tp_host_t *host, const tp_config_t *cfg, void **out_self);
  /** [main] Accepts NULL. */
  void (*destroy)(void *self);
  /** [main & !training step] Moves parameters and buffers to the device (TP_DEVICE_*, index)
   *  and floating-point ones to `dtype` (TP_DTYPE_FLOAT32 normally). Handles obtained from
   *  visit_state before the call are invalid afterwards: visit again. */
  tp_status (*to_device)(void *self, int32_t device_type, int32_t device_index, int32_t dtype);
  /** [main] Switches train/eval behaviour (dropout, batch-norm statistics). */
  tp_status (*set_training)(void *self, bool training);
  /** [main] Visits every parameter (is_buffer = false) and persistent buffer (is_buffer =
   *  true) with a stable, unique, dotted name ("features.0.weight"), in the same order every
   *  time. Each handle is borrowed for the visitor call only (tp_state_visitor); the tensor it
   *  points at is the model's own, and must stay the model's parameter or buffer, updated in
   *  place, until destroy() or to_device(): the host keeps copies of those tensors, which share
   *  their storage, and trains through them. */
  tp_status (*visit_state)(void *self, tp_state_visitor visit, void *user);
  /** [main] Runs the model. `inputs` (borrowed, for the call) are all the batch's fields, on
   *  the model's device, batch dimension first. Writes up to `capacity` outputs (names
   *  valid until destroy(), tensors new references released by the host; more outputs than
   *  `capacity` is an error, TP_ERR_INVALID_ARGUMENT) and their number. The host passes every
   *  slot NULL. On error, every handle left in a slot is still a new reference that the host
   *  releases (PLG-9, "outputs of a failed call"): a plugin may fail after writing some outputs,
   *  and one that released an output itself sets its slot back to NULL. Grad mode
   *  and autocast are already set by the host; never synchronize the device here (PLG-11). */
  tp_status (*forward)(void *self, const tp_named_tensor_t *inputs, uint32_t input_count,
                       tp_named_tensor_t *out_outputs, uint32_t capacity, uint32_t *out_count);

  /** [main & !training step] Optional: NULL means the model cannot checkpoint activations, and
   *  the host refuses `activation_checkpointing = true` with a configuration error naming this
   *  component. Switches activation checkpointing of the model's declared blocks on or off
   *  (off after create). The host calls it before training starts, after to_device; accept
   *  repeated calls. It must not change the state visit_state hands out (names, tensors).
   *  It affects only forward calls made in training mode with grad mode on: the model's outputs
   *  and the gradients backward produces must equal those without checkpointing (up to float
   *  rounding); only memory use and time change. Return TP_ERR_UNSUPPORTED (with a message
   *  through host->fail) when this instance has nothing to checkpoint, e.g. a configuration
   *  without such blocks; switching off never fails.
   *  @since 1.1 */
  tp_status (*set_activation_checkpointing)(void *self, bool enabled)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr /* see "Rationale" at the top of this file */
#endif
      ;

  /** [main] Optional: NULL means the model declares no depth ordering, and the host refuses
   *  `optim.layer_decay` with a configuration error naming this component. Writes the model's
   *  depth ordering: `*out_entries` (borrowed, valid until destroy()) holds `*out_count` entries.
   *  A parameter takes the depth of the longest prefix that claims it (whole dotted components:
   *  "layer1.0" claims "layer1.0.conv1.weight", not "layer1.01.weight"); parameters no prefix
   *  claims are the head, one past the deepest declared depth. Prefixes are unique, non-empty;
   *  one that claims no parameter (a pooling layer) is ignored (PLG-16). Return TP_ERR_UNSUPPORTED
   *  (with a message through host->fail) when this instance has no ordering to declare.
   *  @since 1.4 */
  tp_status (*layer_depths)(void *self, const tp_layer_depth_t **out_entries, uint32_t *out_count)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;
  /** [main & !training step] Optional: NULL means the host refuses `[model] freeze_bn_stats =
   *  true` naming this component. With `frozen` true, the model's batch-normalisation layers stay
   *  in eval mode whatever set_training says afterwards: they normalise with their running
   *  statistics and never update them, while the rest of the model (their affine parameters
   *  included) trains; false restores normal behaviour. The host calls it after to_device, before
   *  training; accept repeated calls. Return TP_ERR_UNSUPPORTED (with a message) when `frozen` is
   *  true and the model has no batch-normalisation layer; switching off never fails (PLG-16).
   *  @since 1.4 */
  tp_status (*set_batchnorm_frozen)(void *self, bool frozen)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;

  /** [main & !training step] Optional: NULL means the model's training forward and backward can
   *  be captured in a CUDA graph and replayed: it follows PLG-11 (never synchronises the device)
   *  and its kernels, their launch parameters and the shapes they produce depend only on the
   *  shapes of its inputs, not on their values. Otherwise returns TP_OK when this instance can be
   *  captured, or TP_ERR_UNSUPPORTED with a one-sentence reason through host->fail (for example
   *  "reads the number of boxes on the host"); the host then refuses `run.cuda_graphs = "on"`
   *  naming the component and that reason, and `"auto"` trains eagerly. Other uncapturable forwards:
   *  data-dependent shapes or control flow, work on CUDA streams of its own, generators of its
   *  own (PLG-18). Called once before training, after to_device and set_activation_checkpointing.
   *  @since 1.8 */
  tp_status (*check_graph_capture)(void *self)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;

  /** [main & !inside the captured region] Optional: NULL (or a table from before 1.14) means no
   *  hook. Called once after every optimizer step of training, with `step` the number of optimizer
   *  steps done so far (1-based: the count checkpoints record and resume from, so the first call of
   *  a run resumed at step 40 has step 41) and `total_steps` the run's planned total, the one the
   *  lr schedule spans (train.epochs or train.max_steps over the accumulation windows; always >= 1,
   *  and `step` may stop short of it: max_time, early stopping, a stop signal). For a momentum
   *  teacher (BYOL, DINO, MoCo: target = m * target + (1 - m) * online, with a schedule of m from
   *  step / total_steps) and schedules of the model's own (DINO's teacher temperature).
   *
   *  When: after the optimizer step and the schedule's step (so the weights are the just-updated
   *  ones) and before the host's weights' finiteness watch and its EMA update ([ema]) of the same
   *  step, so the EMA, the finiteness check and a checkpoint see the model as the whole step left
   *  it, this hook's updates included (SWA folds in per epoch, after the epoch's last call). It
   *  follows every window the step count advances for, whether or not the weights changed: a step
   *  the fp16 grad scaler skipped (inf gradients; on the device, so the host cannot tell without
   *  a sync), and a window train.nan_policy = "skip" or an empty window skipped, still call it, as
   *  timm and Lightning update their EMA regardless; `step` therefore counts 1, 2, 3... without
   *  gaps. Never for a micro-batch inside an accumulation window, a partial window the loader
   *  ended (no step is counted), evaluation, SWA's update_bn, a piece replayed after
   *  train.on_oom = "split", `host profile`, or the in-process forwards of `host verify` (the
   *  training checks of `host verify` and `host tune` run a child `host train`, whose optimizer
   *  steps are real and call it). Every rank calls it with the same step and total, after the
   *  gradients were all-reduced, so a teacher updated here stays identical across ranks.
   *
   *  How: grad mode is off (the host holds a no-grad guard) and no autocast is active, so in-place
   *  updates need no torch::NoGradGuard of the plugin's own; the model is in training mode. It may
   *  update lent state in place (parameters with requires_grad = false, buffers) and state it keeps
   *  hidden; lent tensors stay the same tensors (visit_state's rule: update in place, never
   *  replace), and so must hidden ones the forward reads under run.cuda_graphs. Lent state updated
   *  here is checkpointed and restored with the rest, so a resumed run continues the teacher bit
   *  for bit. It must not touch the trainable parameters, their gradients or the optimizer, and,
   *  like forward, never synchronise the device (PLG-11). Under run.cuda_graphs it runs eagerly,
   *  outside the graph, after each replay (as the EMA does): its kernels are never captured. An
   *  error stops the run (a plugin error naming this function and the step); PLG-21.
   *  @since 1.14 */
  tp_status (*after_optimizer_step)(void *self, int64_t step, int64_t total_steps)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;

  /** [main & !training step] Optional: NULL (or a table from before 1.14) means the host refuses
   *  `[[optim.param_groups]] freeze_bn_stats = true` naming this component. Keeps the
   *  batch-normalisation layers named in `names` (`count` dotted module names, borrowed for the
   *  call: the prefix of a layer's state names, "teacher.bn1" for "teacher.bn1.running_mean") in
   *  eval mode whatever set_training says afterwards, as set_batchnorm_frozen does for all of them:
   *  they normalise with their running statistics and never update them, while the rest of the
   *  model trains. A later call replaces the set; `count` 0 clears it. For a frozen teacher inside
   *  the model whose BatchNorm statistics must stay as loaded. Returns TP_ERR_UNSUPPORTED (with a
   *  message naming it) when a name is not a batch-normalisation layer of the model (PLG-16).
   *  @since 1.14 */
  tp_status (*set_batchnorm_frozen_at)(void *self, const char *const *names, uint32_t count)
#if defined(__cplusplus) && __cplusplus >= 201402L
      = nullptr
#endif
      ;
} tp_model_v1_t;

TP_EXTERN_C_END

#endif /* TP_IFACE_MODEL_H */
