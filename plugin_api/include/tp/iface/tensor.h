/* torchhost plugin ABI, Tier T: tensor handles and the types models, losses and metrics share.
 *
 * A tp_tensor (host.h) is an opaque pointer to a heap-allocated `at::Tensor`. Host and plugin
 * share one LibTorch build (the host checks tp_build_info_t), so a handle carries autograd
 * history across the boundary. Handles are either
 *   - borrowed: valid for the stated duration; never released by the receiver, or
 *   - a new reference: the receiver owns it and releases it with host->tensor_release().
 * The C++ helpers in tp/cpp/tensor.h convert between handles and at::Tensor. */
#ifndef TP_IFACE_TENSOR_H
#define TP_IFACE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "tp/host.h"
#include "tp/macros.h"
#include "tp/status.h"

TP_EXTERN_C_BEGIN

/* Element types, for tp_example_input_t and to_device(). */
enum {
  TP_DTYPE_FLOAT32 = 1,
  TP_DTYPE_FLOAT16 = 2,
  TP_DTYPE_BFLOAT16 = 3,
  TP_DTYPE_FLOAT64 = 4,
  TP_DTYPE_INT64 = 5,
  TP_DTYPE_INT32 = 6,
  TP_DTYPE_UINT8 = 7,
  TP_DTYPE_BOOL = 8
};

/* Device types. */
enum { TP_DEVICE_CPU = 1, TP_DEVICE_CUDA = 2 };

/** A named tensor. `name` is UTF-8; who owns `tensor` is stated where the struct is used. */
typedef struct tp_named_tensor_t {
  const char *name;
  tp_tensor tensor;
} tp_named_tensor_t;

/** Visitor for parameters, buffers and metric state. `name` and the handle `tensor` are borrowed
 *  for the duration of the call only: the visitor must not keep the handle. What the handle
 *  points at is the component's own tensor, so a visitor that keeps a copy of it (the host copies
 *  the at::Tensor, which shares its storage) sees and makes in-place updates for as long as the
 *  component keeps that tensor: until destroy() or, for models, to_device(). Return TP_OK to
 *  continue; anything else stops the visit and is returned by visit_state. */
typedef tp_status (*tp_state_visitor)(void *user, const char *name, tp_tensor tensor,
                                      bool is_buffer);

TP_EXTERN_C_END

#endif /* TP_IFACE_TENSOR_H */
