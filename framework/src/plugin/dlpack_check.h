// The one validation of a DLPack tensor a plugin hands the host (a dataset's fields), shared by
// `host plugins check` and training (DatasetProxy::get), so a field check passes is one training
// takes and a field LibTorch would read out of bounds is refused by name (docs/hardening.md).
#pragma once

#include <string>

#include "tp/dlpack.h"

namespace tp::detail {

/// What is wrong with `t` as a CPU tensor the host can adopt, or "" when nothing is: ndim outside
/// 0..kMaxDlpackDims, a NULL shape or data pointer where elements exist, a negative dimension, a
/// vector dtype (lanes != 1) or a width that is not whole bytes, a device other than the CPU, and
/// an element count, byte offset or strided extent that overflows 62 bits, and strides that are
/// negative or do not lay the elements out densely (compact or a permutation of it, such as
/// channels-last; the host never learns the allocation, so a sparser layout could read past it).
/// About 30 ns for a
/// [3, 224, 224] field, a twelfth of adopting it (bench/plugin_boundary; docs/hardening.md,
/// "Tensors crossing the ABI").
std::string dlpack_problem(const DLTensor& t);

/// Dimensions a field may have (LibTorch allows 64; no dataset field comes close).
inline constexpr int kMaxDlpackDims = 32;

}  // namespace tp::detail
