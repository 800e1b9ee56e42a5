// Included last by dlpack_order_{aten,tp}_first.cpp: whichever DLPack header defined the types in
// that translation unit (LibTorch's <ATen/dlpack.h> or the ABI's pinned tp/dlpack.h, which share
// one include guard), they have the bytes the ABI pins, and LibTorch takes a tensor the SDK built.
#pragma once

#include <cstddef>

#include "abi_v1_layout.h"

#if defined(__x86_64__)
#define TP_DLPACK_CHECK_SIZE(T, size, align) \
  static_assert(sizeof(T) == (size) && alignof(T) == (align), "sizeof/alignof of " #T " is not the ABI's");
#define TP_DLPACK_CHECK_OFFSET(T, member, offset) \
  static_assert(offsetof(T, member) == (offset), "offset of " #T "." #member " is not the ABI's");
TP_ABI_V1_DLPACK_SIZES(TP_DLPACK_CHECK_SIZE)
TP_ABI_V1_DLPACK_OFFSETS(TP_DLPACK_CHECK_OFFSET)
#endif
#define TP_DLPACK_CHECK_CONSTANT(name, value) static_assert((name) == (value), #name " is not the ABI's");
TP_ABI_V1_DLPACK_CONSTANTS(TP_DLPACK_CHECK_CONSTANT)
