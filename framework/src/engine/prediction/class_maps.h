// Dense predictions as images: the class map of each sample of a segmentation output, at the
// size of the image file it labels, encoded as a greyscale PNG (`host predict --format png`).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"

namespace tp::detail {

/// Whether `output` is a dense prediction a class map can be made of: floating [B, C, H, W]
/// scores, or integer [B, H, W] class ids.
bool is_dense_output(const at::Tensor& output);

/// PNG bytes of the first `rows` samples' class maps of the dense output `name`: argmax over C
/// of [B, C, H, W] scores, or the integer [B, H, W] ids as they are; 8-bit greyscale when every
/// class fits (C <= 256, ids < 256), else 16-bit. A map of an image of the batch is that
/// sample's map as pixel_maps (pixel_maps.h) makes it: cut to its own image, scores resized to
/// the file's size before the argmax where the batch gives it, so `<index>.png` has the size of
/// the file it labels. Copies the maps to the CPU (a device sync). Throws tp::Error naming `name`
/// for an output that is not dense, or class ids outside [0, 65535].
std::vector<std::string> encode_class_maps(const std::string& name, const at::Tensor& output, const NamedTensors& batch,
                                           const BatchLayout& layout, int64_t rows);

}  // namespace tp::detail
