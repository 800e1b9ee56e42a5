// Collation: turns a list of samples into one batch by stacking each field along a new leading
// dimension, or, for the fields a dataset declares variable-size (batch_layout.h), by padding
// them to the batch's largest sample or concatenating them with offsets. This is the one copy on the data path; it is where the sample tensors (which may
// borrow a plugin's buffers through DLPack) are released.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tp/framework/data/batch_layout.h"
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
  /// The dataset's variable-size fields (plugin ABI 1.6); nullptr or empty: every field stacks.
  /// Borrowed for the duration of the call.
  const BatchLayout* layout = nullptr;
};

/// Stacks `samples` into one batch: field f of the result is at::stack of field f of every
/// sample along a new dim 0, so a field of shape [C, H, W] becomes [B, C, H, W] (a scalar field
/// becomes [B]). Field names and their order come from the first sample.
///
/// A field `options.layout` declares pad becomes [B, max sizes...] filled with its pad value and
/// each sample copied to the start of every dim, followed by "<name>_lengths" int64 [B, D]; a
/// ragged field becomes the samples concatenated along dim 0, [sum N_i, ...], followed by
/// "<name>_offsets" int64 [B + 1] (sample i is rows offsets[i] .. offsets[i+1] - 1).
///
/// Checks that every sample has the same field names in the same order, the same dtypes and the
/// same shapes (a pad field: the same number of dims; a ragged field: the same sizes past dim 0),
/// and throws tp::Error naming the field, the sample (position, and dataset index when given) and
/// both values otherwise; also for a declared field the samples lack, a scalar declared
/// variable-size, a sample field named like one collate adds, and a fractional pad value for an
/// integer field. Samples must be CPU tensors; they may be non-contiguous.
///
/// Takes the samples by rvalue: each field's sample tensors are dropped right after that field
/// is stacked, so plugin buffers are released field by field (on the calling thread), and
/// `samples` is empty on return, also when it throws. Throws tp::Error when `samples` is empty.
///
/// Example:
///   NamedTensors batch = tp::collate(std::move(samples));   // {"image": [B,3,H,W], "label": [B]}
NamedTensors collate(std::vector<NamedTensors>&& samples, const CollateOptions& options = {});

/// Samples [start, start + count) of a collated batch: every field narrowed along dim 0 (views,
/// no copy); a ragged field of `layout` to its rows of those samples, and its offsets rebased to
/// start at 0 (a new tensor; reads two offsets back, so it syncs a CUDA batch). Pad fields keep
/// the whole batch's padded size. Throws tp::Error naming a field that is not [B, ...] with
/// B >= start + count, or a ragged field without its offsets.
///
/// Example:
///   NamedTensors second_half = tp::batch_rows(batch, 8, 8);   // {"image": [8,3,H,W], "label": [8]}
NamedTensors batch_rows(const NamedTensors& batch, int64_t start, int64_t count, const BatchLayout& layout = {});

}  // namespace tp
