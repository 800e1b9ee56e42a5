// Ragged model outputs (a detector's boxes, scores and labels: a different number per sample) as
// JSON arrays for `host predict --format jsonl`: one fragment per sample, which the writer puts
// into that sample's line.
#pragma once

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

}  // namespace tp::detail
