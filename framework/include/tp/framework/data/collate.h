// Collation: turns a list of samples into one batch by stacking each field along a new leading
// dimension. This is the one copy on the data path; it is where the sample tensors (which may
// borrow a plugin's buffers through DLPack) are released.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tp/framework/data/sample_source.h"

namespace tp {

/// Options of collate().
struct CollateOptions {
  /// Dataset index of each sample, used only in error messages ("sample 3 (dataset index 812)").
  /// Empty, or exactly one entry per sample. Borrowed for the duration of the call.
  std::span<const uint64_t> dataset_indices;
  /// Allocate the batch in page-locked (pinned) host memory and stack straight into it, so the
  /// later non_blocking copy to the GPU is asynchronous, at no extra copy. Needs a CUDA build and
  /// device: throws (from LibTorch) otherwise.
  bool pin_memory = false;
};

/// Stacks `samples` into one batch: field f of the result is at::stack of field f of every
/// sample along a new dim 0, so a field of shape [C, H, W] becomes [B, C, H, W] (a scalar field
/// becomes [B]). Field names and their order come from the first sample.
///
/// Checks that every sample has the same field names in the same order, the same dtypes and the
/// same shapes, and throws tp::Error naming the field, the sample (position, and dataset index
/// when given) and both values otherwise. Samples must be CPU tensors; they may be
/// non-contiguous.
///
/// Takes the samples by rvalue: each field's sample tensors are dropped right after that field
/// is stacked, so plugin buffers are released field by field (on the calling thread), and
/// `samples` is empty on return, also when it throws. Throws tp::Error when `samples` is empty.
///
/// Example:
///   NamedTensors batch = tp::collate(std::move(samples));   // {"image": [B,3,H,W], "label": [B]}
NamedTensors collate(std::vector<NamedTensors>&& samples, const CollateOptions& options = {});

/// Samples [start, start + count) of a collated batch: every field narrowed along dim 0 (views,
/// no copy). Throws tp::Error naming a field that is not [B, ...] with B >= start + count.
///
/// Example:
///   NamedTensors second_half = tp::batch_rows(batch, 8, 8);   // {"image": [8,3,H,W], "label": [8]}
NamedTensors batch_rows(const NamedTensors& batch, int64_t start, int64_t count);

}  // namespace tp
