// The `mean` and `std` keys of the image datasets (image_folder and webdataset through
// transform_config, segmentation_folder, coco_detection): three RGB values applied to pixels
// scaled to [0, 1], `(v / 255 - mean) / std`. One reading, so each dataset refuses the same
// mistakes with the same words. Header-only: the plugins include it without another library.
#pragma once

#include <array>
#include <sstream>
#include <string>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"

namespace tp::datasets {

/// `values` as TOML text, "[123.675, 116.28, 103.53]", each multiplied by `scale` (1/255 shows
/// what a 0-255 value is on the [0, 1] scale), with up to `digits` significant digits.
inline std::string rgb_text(const std::vector<double>& values, double scale = 1.0, int digits = 6) {
  std::ostringstream text;
  text.precision(digits);
  text << '[';
  for (std::size_t i = 0; i < values.size(); ++i) text << (i == 0 ? "" : ", ") << values[i] * scale;
  text << ']';
  return text.str();
}

/// The key `key` ("mean" or "std") of `cfg` as R, G, B. Throws tp::cpp::Failure(TP_ERR_CONFIG)
/// prefixed "<component>: " naming the key when it does not hold 3 values, when `positive` and a
/// value is not > 0 (a std of 0 divides by zero), and when a value is above 1: on the [0, 1]
/// scale the formula works on, a mean or a std above 1 is no statistic of any image set, while
/// mmcv's and detectron2's configs give ImageNet's as 0-255 values (mean = [123.675, 116.28,
/// 103.53], std = [58.395, 57.12, 57.375]) that were accepted and trained on inputs around -2 or
/// 1/255 of the scale meant, without a word (data trial F13). The message shows the values
/// divided by 255. Negative means are allowed (mean = [-1, -1, -1] shifts values up on purpose).
inline std::array<float, 3> read_rgb_key(const tp::cpp::ConfigReader& cfg, const char* component, const char* key,
                                         bool positive) {
  const std::vector<double> v = cfg.get_float_array(key);
  const std::string prefix = std::string(component) + ": " + key;
  if (v.size() != 3)
    throw tp::cpp::Failure(TP_ERR_CONFIG, prefix + " needs 3 values (R, G, B), got " + std::to_string(v.size()));
  for (double x : v)
    if (positive && !(x > 0.0)) throw tp::cpp::Failure(TP_ERR_CONFIG, prefix + " values must be > 0");
  for (double x : v)
    if (x > 1.0)
      throw tp::cpp::Failure(
          TP_ERR_CONFIG, prefix + " = " + rgb_text(v) + " holds a value above 1, and these look like 0-255 values "
                             "(as mmcv and detectron2 write them); here pixels are scaled to [0, 1] before the "
                             "mean and std apply, (v / 255 - mean) / std, so divide them by 255: " + key + " = " +
                             rgb_text(v, 1.0 / 255.0, 4) + " (ImageNet's are mean = [0.485, 0.456, 0.406], std = "
                             "[0.229, 0.224, 0.225])");
  return {static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2])};
}

}  // namespace tp::datasets
