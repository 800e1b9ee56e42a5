// The transform keys of the image datasets (resize, crops, interpolation, flip, colour jitter, RandAugment /
// TrivialAugmentWide, random erasing, normalisation, layout, decode limits): their schema
// entries and their reading into TransformOptions, one definition for every dataset that serves
// images through image_pipeline.h (image_folder, webdataset), so a key means the same in each;
// and what the keys allow of a host that decodes the images itself (plugin ABI 1.11).
//
// A plugin's schema is one static tp_config_key_t array (its descriptor points at it), so the
// shared entries are joined to the plugin's own at compile time:
//
//   constexpr tp_config_key_t kOwnKeys[] = {tp::cpp::config_key("root", TP_CFG_PATH, nullptr, "...")};
//   constexpr auto kKeys = tp::datasets::join_keys(kOwnKeys, tp::datasets::kTransformKeys);
//   const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor("org.x.y", "1.0.0", "...", kKeys.keys);
#pragma once

#include <cstddef>

#include "image_pipeline.h"
#include "tp/config.h"
#include "tp/cpp/config.h"
#include "tp/iface/dataset.h"

namespace tp::datasets {

/// The schema entries of the transform keys, in the order `host plugins list --verbose` shows.
/// Every default is the TransformOptions default; "train only" keys are ignored by other splits.
inline constexpr tp_config_key_t kTransformKeys[] = {
    tp::cpp::config_key(
        "resize", TP_CFG_INT_ARRAY, "[]",
        "[s]: shorter side to s; [h, w]: exact size; []: keep (both splits; train ignores it with random_resized_crop)"),
    tp::cpp::config_key("center_crop", TP_CFG_INT_ARRAY, "[]", "[s] or [h, w] after resize; []: none"),
    tp::cpp::config_key("random_resized_crop", TP_CFG_INT_ARRAY, "[]",
                        "train only: [s] or [h, w] output of torchvision's RandomResizedCrop; []: none"),
    tp::cpp::config_key("scale", TP_CFG_FLOAT_ARRAY, "[0.08, 1.0]", "random_resized_crop area range"),
    tp::cpp::config_key("ratio", TP_CFG_FLOAT_ARRAY, "[0.75, 1.3333333333333333]",
                        "random_resized_crop aspect (w/h) range"),
    tp::cpp::config_key("interpolation", TP_CFG_STRING, "\"bilinear\"",
                        "the resize of resize/center_crop and random_resized_crop: \"bilinear\" (area averaging when "
                        "shrinking, bilinear when enlarging) or \"bicubic\" (PIL's antialiased bicubic, torchvision's "
                        "and timm's BICUBIC; full-size JPEG decode, CPU decode only)"),
    tp::cpp::config_key("hflip", TP_CFG_FLOAT, "0.0", "train only: probability of a horizontal flip"),
    tp::cpp::config_key("brightness", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-b, 1+b]"),
    tp::cpp::config_key("contrast", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-c, 1+c]"),
    tp::cpp::config_key("saturation", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-s, 1+s]"),
    tp::cpp::config_key("rand_augment", TP_CFG_INT_ARRAY, "[]",
                        "train only: [N, M] torchvision RandAugment after the flip: N ops (0..14) at magnitude bin M "
                        "(0..30 of 31); []: off"),
    tp::cpp::config_key("trivial_augment", TP_CFG_BOOL, "false",
                        "train only: torchvision TrivialAugmentWide (one op, random bin of 31) after the flip; not with "
                        "rand_augment"),
    tp::cpp::config_key("random_erasing", TP_CFG_FLOAT, "0.0",
                        "train only: probability of torchvision RandomErasing on the normalised image (0 = off)"),
    tp::cpp::config_key("erasing_scale", TP_CFG_FLOAT_ARRAY, "[0.02, 0.33]",
                        "random_erasing: [lo, hi] erased fraction of the image area, 0 <= lo <= hi <= 1"),
    tp::cpp::config_key("erasing_ratio", TP_CFG_FLOAT_ARRAY, "[0.3, 3.3]",
                        "random_erasing: [lo, hi] aspect (h/w) range of the box, drawn log-uniformly, 0 < lo <= hi"),
    tp::cpp::config_key("erasing_value", TP_CFG_STRING, "\"zero\"",
                        "random_erasing: \"zero\" (0 after normalisation) or \"random\" (standard normal per value)"),
    tp::cpp::config_key("views", TP_CFG_INT, "1",
                        "train only: N in 1..16; N > 1 gives each image N independently augmented views, the fields "
                        "image_0 .. image_{N-1} instead of image (SimCLR, BYOL, MoCo; DINO's global crops)"),
    tp::cpp::config_key("local_views", TP_CFG_INT, "0",
                        "train only: M in 0..16 more views of local_crop's size cut with local_scale, the fields "
                        "local_0 .. local_{M-1} (DINO's and SwAV's multi-crop); needs random_resized_crop"),
    tp::cpp::config_key("local_crop", TP_CFG_INT_ARRAY, "[96]", "local_views: [s] or [h, w], their crop's output size"),
    tp::cpp::config_key("local_scale", TP_CFG_FLOAT_ARRAY, "[0.05, 0.4]",
                        "local_views: their crop's area range (DINO's; its global views use scale = [0.4, 1.0])"),
    tp::cpp::config_key("mean", TP_CFG_FLOAT_ARRAY, "[0.0, 0.0, 0.0]", "RGB mean subtracted after scaling to [0, 1]"),
    tp::cpp::config_key("std", TP_CFG_FLOAT_ARRAY, "[1.0, 1.0, 1.0]", "RGB std divided by after the mean"),
    tp::cpp::config_key("channels_last", TP_CFG_BOOL, "false", "image memory HWC (strides), logical shape still [3, H, W]"),
    tp::cpp::config_key("fast_decode", TP_CFG_BOOL, "true",
                        "decode JPEGs at 1/2, 1/4, 1/8 scale when the crop is at least that much larger than the output"),
    tp::cpp::config_key("max_image_pixels", TP_CFG_INT, kDefaultMaxImagePixelsText, kMaxImagePixelsHelp),
};

/// N schema entries in one array member, so a joined schema can be a constexpr value whose
/// `keys` a descriptor points at (tp::cpp::dataset_descriptor takes a C array).
template <std::size_t N>
struct ConfigKeys {
  tp_config_key_t keys[N];
};

/// `first`'s entries followed by `second`'s, at compile time (the result of a constexpr
/// variable: static storage, as PLG-6 requires of a schema).
template <std::size_t A, std::size_t B>
constexpr ConfigKeys<A + B> join_keys(const tp_config_key_t (&first)[A], const tp_config_key_t (&second)[B]) {
  ConfigKeys<A + B> out{};
  for (std::size_t i = 0; i < A; ++i) out.keys[i] = first[i];
  for (std::size_t i = 0; i < B; ++i) out.keys[A + i] = second[i];
  return out;
}

/// The transform keys of `cfg` (a table whose schema holds kTransformKeys) as TransformOptions
/// for the train split (`train`: the random transforms run) or another. `component` (static
/// storage) prefixes every message and is kept in the options for the pipeline's. Throws
/// tp::cpp::Failure(TP_ERR_CONFIG) naming the key when a value is out of its range, and when a
/// split without random crops would get images of their natural sizes (random_resized_crop
/// without center_crop or resize), which cannot be batched.
TransformOptions read_transform(const tp::cpp::ConfigReader& cfg, bool train, const char* component);

/// The output size every image of a split read with `o` gets ([3, h, w]), or an unset Size2 when
/// it varies: random_resized_crop on the train split, else center_crop, else resize = [h, w];
/// resize = [s] or no size key keeps each image's own proportions.
Size2 fixed_output_size(const TransformOptions& o);

/// Whether a split read with `o` makes several views of each image (the train split with views > 1
/// or local_views > 0): fields image_0 .. and local_0 .. instead of "image" (image_field.h add_image_views).
bool makes_views(const TransformOptions& o);

/// Why a split read with `o` cannot hand its "image" field over encoded for the host to decode on
/// the device (plugin ABI 1.11, tp_encoded_image_t.reason), as one sentence naming the keys, or
/// "" when it can. It can when its output is a fixed size made only by crop, resize, flip and
/// normalisation: not when the size varies (fixed_output_size), nor with interpolation = "bicubic"
/// (any split: the device kernel resizes bilinearly), nor on the train split with views or
/// local_views (several image fields per sample), rand_augment, trivial_augment, random_erasing,
/// brightness, contrast or saturation (they change decoded pixels; other splits ignore them).
std::string encoded_image_refusal(const TransformOptions& o);

/// The split's declaration of "image" (of "image_0" when makes_views(o), whose samples have no
/// "image") for tp_dataset_v1_t.encoded_images: unavailable with
/// `refusal` when it is not empty (borrowed by the result: keep it alive as long as the
/// declaration, e.g. as a member of the dataset instance), else available with
/// fixed_output_size(o), o's mean and std (their defaults 0 and 1 when the keys are not set) and
/// channels_last.
tp_encoded_image_t encoded_image_declaration(const TransformOptions& o, const std::string& refusal);

}  // namespace tp::datasets
