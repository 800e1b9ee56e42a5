// The largest image a call decodes (serving trial F10). The export's evaluation table carries the
// training's `max_image_pixels` (179 million pixels by default: 500 MB of pixels for one upload),
// which a service answering untrusted uploads wants lower, and whose refusal told the library's
// caller to raise a key of a training table it cannot reach.
#pragma once

#include <cstdint>
#include <string>

#include "tp/framework/config/run_config.h"

namespace tp::infer::detail {

/// Lowers the validated dataset table `dataset`'s `max_image_pixels` (0 there: no limit) to
/// `limit` (OpenOptions::max_image_pixels) when `limit` is above 0 and below it; a table without
/// the key (a dataset that decodes no images) is left as it is.
void lower_decode_limit(ComponentConfig& dataset, int64_t limit);

/// A dataset's failure `message`, with its advice to raise the training key `max_image_pixels`
/// turned into what the library's caller can do: OpenOptions::max_image_pixels (C:
/// tp_infer_set_max_image_pixels) up to the export's limit, or an export of a run with a higher one.
std::string library_decode_advice(std::string message);

}  // namespace tp::infer::detail
