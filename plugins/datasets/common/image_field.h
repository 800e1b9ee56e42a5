// The "image" field of the image datasets (image_folder, webdataset): a transformed image handed
// to the host as a DLPack float32 [3, H, W] tensor that owns its pixels, so it outlives the
// dataset instance that made it (PLG-13) and its deleter is the plugin's own (PLG-9); or, when the
// host decodes on the device (plugin ABI 1.11), the image file's bytes and the crop to cut.
#pragma once

#include <vector>

#include "image_pipeline.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/iface/dataset.h"

namespace tp::datasets {

/// The field "image" owning `image`'s pixels (moved out): float32 [3, h, w], compact CHW memory,
/// or HWC memory (strides {1, 3w, 3}) when `channels_last`. Its deleter frees the buffer and the
/// DLPack struct. Throws std::bad_alloc only.
tp_field_t make_image_field(Image&& image, bool channels_last);

/// The encoded form of "image" (tp_encoded_image_t, ABI 1.11) added to `out`: "image", uint8 [N],
/// the file's `bytes` as stored (moved in, no copy), and "image_box", int32 [7], `box.values()`.
/// Throws std::bad_alloc only (`out` then releases what it holds).
void add_encoded_image(tp::cpp::Sample& out, std::vector<unsigned char>&& bytes, const ImageBox& box);

}  // namespace tp::datasets
