#include "transform_config.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "augment_policy.h"
#include "rgb_key.h"
#include "tp/cpp/guard.h"

namespace tp::datasets {
namespace {

using tp::cpp::Failure;

/// "<component>: " for messages.
std::string prefix_of(const char* component) { return std::string(component) + ": "; }

Size2 read_size(const tp::cpp::ConfigReader& cfg, const char* component, const char* key, bool allow_short,
                int* out_short) {
  const std::vector<int64_t> v = cfg.get_int_array(key);
  for (int64_t x : v) {
    if (x < 1 || x > 65535)
      throw Failure(TP_ERR_CONFIG, prefix_of(component) + key + " values must be in [1, 65535], got " + std::to_string(x));
  }
  if (v.empty()) return {};
  if (v.size() == 1) {
    if (allow_short) {
      *out_short = static_cast<int>(v[0]);
      return {};
    }
    return {static_cast<int>(v[0]), static_cast<int>(v[0])};
  }
  if (v.size() == 2) return {static_cast<int>(v[0]), static_cast<int>(v[1])};
  throw Failure(TP_ERR_CONFIG, prefix_of(component) + key + " must be [] , [s] or [h, w], got " +
                                   std::to_string(v.size()) + " values");
}

std::array<double, 2> read_range(const tp::cpp::ConfigReader& cfg, const char* component, const char* key) {
  const std::vector<double> v = cfg.get_float_array(key);
  if (v.size() != 2 || !(v[0] > 0.0) || !(v[0] <= v[1]))
    throw Failure(TP_ERR_CONFIG, prefix_of(component) + key + " must be [lo, hi] with 0 < lo <= hi");
  return {v[0], v[1]};
}

AugmentOptions read_augment(const tp::cpp::ConfigReader& cfg, const char* component) {
  AugmentOptions a;
  const std::vector<int64_t> ra = cfg.get_int_array("rand_augment");
  const bool trivial = cfg.get_bool("trivial_augment");
  if (!ra.empty()) {
    if (ra.size() != 2)
      throw Failure(TP_ERR_CONFIG, prefix_of(component) + "rand_augment must be [] or [N, M], got " +
                                       std::to_string(ra.size()) + " values");
    if (ra[0] < 0 || ra[0] > kAugOpCount)
      throw Failure(TP_ERR_CONFIG, prefix_of(component) + "rand_augment N (number of ops) must be in [0, 14], got " +
                                       std::to_string(ra[0]));
    if (ra[1] < 0 || ra[1] >= kMagnitudeBins)
      throw Failure(TP_ERR_CONFIG, prefix_of(component) + "rand_augment M (magnitude bin) must be in [0, 30], got " +
                                       std::to_string(ra[1]));
    if (trivial)
      throw Failure(TP_ERR_CONFIG, prefix_of(component) + "set either rand_augment or trivial_augment, not both");
    a.kind = AugmentOptions::Kind::kRandAugment;
    a.num_ops = static_cast<int>(ra[0]);
    a.magnitude = static_cast<int>(ra[1]);
  } else if (trivial) {
    a.kind = AugmentOptions::Kind::kTrivialAugmentWide;
  }
  return a;
}

Interpolation read_interpolation(const tp::cpp::ConfigReader& cfg, const char* component) {
  const std::string value = cfg.get_string("interpolation");
  if (value == "bilinear") return Interpolation::kBilinear;
  if (value == "bicubic") return Interpolation::kBicubic;
  throw Failure(TP_ERR_CONFIG, prefix_of(component) + "interpolation must be \"bilinear\" (the default: area averaging "
                                   "when shrinking, bilinear when enlarging) or \"bicubic\" (PIL's antialiased bicubic, "
                                   "timm's --interpolation bicubic), got \"" + value + "\"");
}

ErasingOptions read_erasing(const tp::cpp::ConfigReader& cfg, const char* component) {
  ErasingOptions e;
  e.p = cfg.get_float_in("random_erasing", 0.0, 1.0);
  const std::vector<double> scale = cfg.get_float_array("erasing_scale");
  if (scale.size() != 2 || !(scale[0] >= 0.0) || !(scale[0] <= scale[1]) || !(scale[1] <= 1.0))
    throw Failure(TP_ERR_CONFIG, prefix_of(component) + "erasing_scale must be [lo, hi] with 0 <= lo <= hi <= 1");
  e.scale = {scale[0], scale[1]};
  e.ratio = read_range(cfg, component, "erasing_ratio");
  const std::string value = cfg.get_string("erasing_value");
  if (value != "zero" && value != "random")
    throw Failure(TP_ERR_CONFIG,
                  prefix_of(component) + "erasing_value must be \"zero\" or \"random\", got \"" + value + "\"");
  e.random_value = value == "random";
  return e;
}

/// views, local_views, local_crop and local_scale into `t` (after its other keys): the train split's
/// only; every other split keeps one "image".
void read_views(const tp::cpp::ConfigReader& cfg, const char* component, TransformOptions& t) {
  const auto views = static_cast<int>(cfg.get_int_in("views", 1, kMaxViews));
  const auto local_views = static_cast<int>(cfg.get_int_in("local_views", 0, kMaxViews));
  t.local_crop = read_size(cfg, component, "local_crop", false, nullptr);
  t.local_scale = read_range(cfg, component, "local_scale");
  if (t.local_scale[1] > 1.0) throw Failure(TP_ERR_CONFIG, prefix_of(component) + "local_scale must lie in (0, 1]");
  if (!t.random) return;
  // A local view is a random resized crop at another size: without one on the global views the
  // split has no crop arithmetic to share, and "a small view" has no meaning a user could check.
  if (local_views > 0 && (!t.random_resized_crop.set() || !t.local_crop.set()))
    throw Failure(TP_ERR_CONFIG, prefix_of(component) +
                                     "local_views needs random_resized_crop (the global views' crop) and a local_crop "
                                     "size, e.g. random_resized_crop = [224], scale = [0.4, 1.0], local_crop = [96]");
  t.views = views;
  t.local_views = local_views;
}

}  // namespace

TransformOptions read_transform(const tp::cpp::ConfigReader& cfg, bool train, const char* component) {
  TransformOptions t;
  t.component = component;
  t.resize = read_size(cfg, component, "resize", true, &t.resize_short);
  t.center_crop = read_size(cfg, component, "center_crop", false, nullptr);
  t.random_resized_crop = read_size(cfg, component, "random_resized_crop", false, nullptr);
  t.scale = read_range(cfg, component, "scale");
  if (t.scale[1] > 1.0) throw Failure(TP_ERR_CONFIG, prefix_of(component) + "scale must lie in (0, 1]");
  t.ratio = read_range(cfg, component, "ratio");
  t.interpolation = read_interpolation(cfg, component);
  t.hflip = cfg.get_float_in("hflip", 0.0, 1.0);
  t.brightness = cfg.get_float_in("brightness", 0.0, 1e6);
  t.contrast = cfg.get_float_in("contrast", 0.0, 1e6);
  t.saturation = cfg.get_float_in("saturation", 0.0, 1e6);
  t.augment = read_augment(cfg, component);
  t.erasing = read_erasing(cfg, component);
  t.mean = read_rgb_key(cfg, component, "mean", false);
  t.std = read_rgb_key(cfg, component, "std", true);
  t.channels_last = cfg.get_bool("channels_last");
  t.fast_decode = cfg.get_bool("fast_decode");
  t.max_image_pixels = cfg.get_int_in("max_image_pixels", 0, kMaxImagePixelsBound);
  t.random = train;
  read_views(cfg, component, t);
  // A split without random crops has no random crop: a config with only random_resized_crop
  // would give its images their natural sizes, which cannot be batched. Say so instead of failing
  // in collate.
  if (!train && t.random_resized_crop.set() && !t.center_crop.set() && !t.resize.set())
    throw Failure(TP_ERR_CONFIG,
                  prefix_of(component) +
                      "random_resized_crop applies to the train split only; set `center_crop` (and usually `resize`) "
                      "too, so val images get a fixed size (e.g. resize = [256], center_crop = [224])");
  return t;
}

Size2 fixed_output_size(const TransformOptions& o) {
  if (o.random && o.random_resized_crop.set()) return o.random_resized_crop;
  if (o.center_crop.set()) return o.center_crop;
  if (o.resize.set()) return o.resize;
  return {};
}

bool makes_views(const TransformOptions& o) { return o.random && (o.views > 1 || o.local_views > 0); }

std::string encoded_image_refusal(const TransformOptions& o) {
  if (makes_views(o))
    return prefix_of(o.component) + "views = " + std::to_string(o.views) + " and local_views = " +
           std::to_string(o.local_views) +
           " make several image fields per sample, and the host decodes one, so the train split's images are "
           "decoded on the CPU";
  if (!fixed_output_size(o).set())
    return prefix_of(o.component) +
           "the image size varies (no random_resized_crop on train, center_crop or resize = [h, w]), so this "
           "split's images are decoded on the CPU";
  std::vector<const char*> keys;
  // The device kernel resizes bilinearly (docs/datasets.md, "Decoding on the GPU"), on every split.
  if (o.interpolation == Interpolation::kBicubic) keys.push_back("interpolation = \"bicubic\"");
  if (o.random) {
    if (o.augment.kind == AugmentOptions::Kind::kRandAugment) keys.push_back("rand_augment");
    if (o.augment.kind == AugmentOptions::Kind::kTrivialAugmentWide) keys.push_back("trivial_augment");
    if (o.erasing.p > 0.0) keys.push_back("random_erasing");
    if (o.brightness > 0.0) keys.push_back("brightness");
    if (o.contrast > 0.0) keys.push_back("contrast");
    if (o.saturation > 0.0) keys.push_back("saturation");
  }
  if (keys.empty()) return "";
  std::string listed;
  for (std::size_t i = 0; i < keys.size(); ++i)
    listed += std::string(i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + keys[i];
  return prefix_of(o.component) + listed + (keys.size() == 1 ? " changes" : " change") +
         " decoded pixels, which only the CPU path makes, so " + (o.random ? "the train split's" : "this split's") +
         " images are decoded on the CPU";
}

tp_encoded_image_t encoded_image_declaration(const TransformOptions& o, const std::string& refusal) {
  tp_encoded_image_t image{};
  image.struct_size = sizeof(tp_encoded_image_t);
  // With views the sample has no "image": the declaration names the field it has instead.
  image.name = makes_views(o) ? "image_0" : "image";
  if (!refusal.empty()) {
    image.available = 0;
    image.reason = refusal.c_str();
    return image;
  }
  const Size2 out = fixed_output_size(o);
  image.available = 1;
  image.reason = nullptr;
  image.out_height = out.h;
  image.out_width = out.w;
  for (int c = 0; c < 3; ++c) {
    image.mean[c] = o.mean[static_cast<std::size_t>(c)];
    image.std[c] = o.std[static_cast<std::size_t>(c)];
  }
  image.channels_last = o.channels_last ? 1U : 0U;
  return image;
}

}  // namespace tp::datasets
