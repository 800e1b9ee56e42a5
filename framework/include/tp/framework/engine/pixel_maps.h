// Per-pixel outputs sample by sample: a segmenter's scores or class ids for a batch, each
// sample's map cut to its own image and, where the dataset gives the image file's size, resized
// back to it. `host predict` writes these (class maps, jsonl rows, csv and npy columns) and the
// inference library returns them, so a prediction lines up with the file's pixels whatever the
// evaluation transform resized or the batch padded (docs/predict.md, "Per-pixel outputs").
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"

namespace tp {

/// The field holding each sample's image size before its transform resized it: int64 [B, 2],
/// (height, width), as the evaluation splits of coco_detection and segmentation_folder give it.
inline constexpr const char* kOriginalSizeField = "orig_size";

/// Whether `output` (a model's output for `batch`) is a per-pixel map of one of the batch's
/// images: floating [B, C, H, W] scores or integer [B, H, W] class ids whose H and W are those of
/// a floating [B, C, H, W] field of `batch` (as collated, so padded where the layout pads it).
bool is_pixel_map(const at::Tensor& output, const NamedTensors& batch);

/// Each sample's own (height, width) in field `name` of `batch`: [B, 2] int64 on the CPU, the
/// last two sizes of the "<name>_lengths" collate added where `layout` pads the field; undefined
/// where it does not (the field stacks, or the batch lacks it): every sample has the batch's size.
at::Tensor own_sizes(const NamedTensors& batch, const BatchLayout& layout, const std::string& name);

/// own_sizes of the image field the per-pixel `output` maps (is_pixel_map); undefined for any
/// other output.
at::Tensor pixel_map_sizes(const at::Tensor& output, const NamedTensors& batch, const BatchLayout& layout);

/// The maps of the first `rows` samples of the per-pixel output `output` (is_pixel_map), each
/// on the CPU, contiguous: [C, h, w] scores or [h, w] ids. Sample i's map is
///  1. cut to the sample's own height and width when `layout` pads the image field it matches
///     (the "<field>_lengths" collate added to `batch`; padding is never part of a map), then
///  2. resized to row i of `batch`'s kOriginalSizeField when the batch has it and the sizes
///     differ: scores bilinearly (align_corners = false, as torchvision's segmentation models
///     upsample their logits), ids by nearest neighbour (as a mask is resized).
/// Without padding and kOriginalSizeField, sample i's map is row i as it is. Empty when `output`
/// is no per-pixel map of `batch`. A device sync (the maps are copied to the CPU). Throws
/// tp::Error for a kOriginalSizeField that is not [>= rows, 2] or holds a size below 1.
std::vector<at::Tensor> pixel_maps(const at::Tensor& output, const NamedTensors& batch, const BatchLayout& layout,
                                   int64_t rows);

}  // namespace tp
