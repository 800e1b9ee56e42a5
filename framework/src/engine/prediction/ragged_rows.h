// Model outputs whose size differs from sample to sample, as JSON arrays for `host predict
// --format jsonl`: ragged outputs (a detector's boxes, scores and labels: a different number per
// sample) and per-pixel maps (a segmenter's, at each image's size). One fragment per sample,
// which the writer puts into that sample's line.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"

namespace tp::detail {

/// For each of the `rows` samples, the JSON members `"<name>":[...]` of the ragged outputs
/// `names` (each in `layout`, with its "<name>_offsets" [rows + 1] in `outputs`), comma-separated:
/// sample i's rows offsets[i] .. offsets[i+1] - 1 as nested arrays ([D, 4] boxes give
/// [[x1, y1, x2, y2], ...]), floats in the shortest text that reads back to the same float32,
/// non-finite ones as null. Copies the outputs to the CPU (a device sync).
std::vector<std::string> ragged_json_members(const NamedTensors& outputs, const std::vector<std::string>& names,
                                             const BatchLayout& layout, int64_t rows);

/// Appends the JSON member `"<name>":` and each sample's map of `maps` (CPU, contiguous; int64,
/// float64 or float32) as nested arrays, [C, h, w] as C arrays of h rows of w numbers, to that
/// sample's fragment of `members` (comma-separated from what is there). Numbers as
/// ragged_json_members writes them.
void append_map_members(std::vector<std::string>& members, const std::string& name, const std::vector<at::Tensor>& maps);

}  // namespace tp::detail
