// The "image" field of the image datasets (image_folder, webdataset): a transformed image handed
// to the host as a DLPack float32 [3, H, W] tensor that owns its pixels, so it outlives the
// dataset instance that made it (PLG-13) and its deleter is the plugin's own (PLG-9); or, when the
// host decodes on the device (plugin ABI 1.11), the image file's bytes and the crop to cut.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image_pipeline.h"
#include "transform_config.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/iface/dataset.h"

namespace tp::datasets {

/// The field `name` (static storage; "image" unless a view's) owning `image`'s pixels (moved out):
/// float32 [3, h, w], compact CHW memory, or HWC memory (strides {1, 3w, 3}) when `channels_last`.
/// Its deleter frees the buffer and the DLPack struct. Throws std::bad_alloc only.
tp_field_t make_image_field(Image&& image, bool channels_last, const char* name = "image");

/// The seed of view `index` of a sample whose seed is `seed`: global views 0 .. kMaxViews - 1, then
/// local views kMaxViews .. 2 kMaxViews - 1. Fixed forever (PLG-8): Rng(seed, 0x100 + index)'s
/// first draw, so view 0 is not the sample's single-view image and no view repeats another's draws.
uint64_t view_seed(uint64_t seed, int index);

/// The views of one image added to `out` (makes_views(o), the train split): image_0 ..
/// image_{o.views - 1} transformed with `o`, then local_0 .. local_{o.local_views - 1} with `o`'s
/// random resized crop set to local_crop and local_scale; view k drawn from view_seed(seed, k)
/// (local k from view_seed(seed, kMaxViews + k)), so each is the pixels transform_image gives for
/// that seed. `bytes` are decoded once per view (a JPEG's crop alone). Throws as transform_image.
void add_image_views(tp::cpp::Sample& out, const std::vector<unsigned char>& bytes, const std::string& name,
                     const TransformOptions& o, uint64_t seed);

/// The encoded form of "image" (tp_encoded_image_t, ABI 1.11) added to `out`: "image", uint8 [N],
/// the file's `bytes` as stored (moved in, no copy), and "image_box", int32 [7], `box.values()`.
/// Throws std::bad_alloc only (`out` then releases what it holds).
void add_encoded_image(tp::cpp::Sample& out, std::vector<unsigned char>&& bytes, const ImageBox& box);

}  // namespace tp::datasets
