// `host plugins check`'s checks of a dataset's encoded images (plugin ABI 1.11,
// tp_encoded_image_t): the declaration, the pixel sample it describes, and the encoded sample read
// with the same index and seed. No device is needed: the checks look at
// dtypes, shapes, the box's bounds and the fields left as they are, never decode.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/data/named_tensors.h"
#include "tp/framework/data/sample_source.h"
#include "tp/iface/dataset.h"

namespace tp::detail {

/// "image [224, 224]" or "image on the CPU (<reason>)" per spec, comma-separated: the summary line.
std::string encoded_images_text(const std::vector<EncodedImageSpec>& specs);

/// What is wrong with `pixels` (a sample read with encoded_images = 0) for the declaration
/// `specs`, or "" when nothing: each declared name is one of the sample's fields, and an
/// available one is float32 [3, out_height, out_width] with the declared memory layout (HWC
/// strides {1, 3 W, 3} when channels_last, else compact).
std::string pixel_sample_problem(const std::vector<EncodedImageSpec>& specs, const NamedTensors& pixels);

/// What is wrong with `encoded` (the same index and seed read with encoded_images = 1) against
/// `pixels`, or "" when nothing: every available field `name` is uint8 [N] with N >= 1 and
/// `<name>_box` int32 [7] whose flip is 0 or 1 and whose crop lies inside the declared height and
/// width (0 <= x0 < x1 <= width, 0 <= y0 < y1 <= height), unless height = width = 0 (the size
/// needs a decode; the host asks for that sample's pixels); every other field has the pixel
/// sample's name, dtype, shape and values, in the same order, an unavailable image included.
std::string encoded_sample_problem(const std::vector<EncodedImageSpec>& specs, const NamedTensors& pixels,
                                   const NamedTensors& encoded);

}  // namespace tp::detail
