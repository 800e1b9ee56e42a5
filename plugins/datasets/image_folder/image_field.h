// The "image" field of the image datasets (image_folder, webdataset): a transformed image handed
// to the host as a DLPack float32 [3, H, W] tensor that owns its pixels, so it outlives the
// dataset instance that made it (PLG-13) and its deleter is the plugin's own (PLG-9).
#pragma once

#include "image_pipeline.h"
#include "tp/iface/dataset.h"

namespace tp::image_folder {

/// The field "image" owning `image`'s pixels (moved out): float32 [3, h, w], compact CHW memory,
/// or HWC memory (strides {1, 3w, 3}) when `channels_last`. Its deleter frees the buffer and the
/// DLPack struct. Throws std::bad_alloc only.
tp_field_t make_image_field(Image&& image, bool channels_last);

}  // namespace tp::image_folder
