#include "encoded_sample_check.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cstdint>

#include "tp/framework/error.h"

namespace tp::detail {
namespace {

const at::Tensor* field_named(const NamedTensors& fields, const std::string& name) {
  const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
  return it != fields.end() ? &it->second : nullptr;
}

std::string tensor_text(const at::Tensor& t) {
  return c10::str(t.scalar_type(), t.sizes());
}

/// The crop `box` (x0, y0, x1, y1, flip, height, width) of field `name`, or what is wrong with it.
std::string box_problem(const std::string& name, const at::Tensor& field) {
  if (field.scalar_type() != at::kInt || field.dim() != 1 || field.size(0) != 7)
    return "field '" + name + "_box' is " + tensor_text(field) + ", expected Int[7] (x0, y0, x1, y1, flip, height, width)";
  const at::Tensor values = field.contiguous();
  const int32_t* b = values.const_data_ptr<int32_t>();
  const std::string text = c10::str("field '", name, "_box' = [", b[0], ", ", b[1], ", ", b[2], ", ", b[3], ", ", b[4],
                                    ", ", b[5], ", ", b[6], "]");
  if (b[4] != 0 && b[4] != 1) return text + ": flip must be 0 or 1";
  if (b[5] == 0 && b[6] == 0) return "";  // the size needs a decode: the host asks for the pixels
  if (b[5] <= 0 || b[6] <= 0) return text + ": height and width must both be > 0, or both 0";
  if (!(0 <= b[0] && b[0] < b[2] && b[2] <= b[6] && 0 <= b[1] && b[1] < b[3] && b[3] <= b[5]))
    return text + ": the crop must lie inside the image, 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height";
  return "";
}

bool replaced_by_encoding(const std::vector<EncodedImageSpec>& specs, const std::string& name) {
  return std::any_of(specs.begin(), specs.end(), [&](const EncodedImageSpec& s) {
    return s.available && (name == s.name || name == s.name + "_box");
  });
}

}  // namespace


std::string encoded_images_text(const std::vector<EncodedImageSpec>& specs) {
  std::string text;
  for (const EncodedImageSpec& spec : specs)
    text += (text.empty() ? "" : ", ") + spec.name +
            (spec.available ? c10::str(" [", spec.out_height, ", ", spec.out_width, "]")
                            : " on the CPU (" + spec.reason + ")");
  return text;
}

std::string pixel_sample_problem(const std::vector<EncodedImageSpec>& specs, const NamedTensors& pixels) {
  for (const EncodedImageSpec& spec : specs) {
    const at::Tensor* field = field_named(pixels, spec.name);
    if (field == nullptr) return "encoded_images declares '" + spec.name + "', which is not a field of the sample";
    if (!spec.available) continue;
    if (field_named(pixels, spec.name + "_box") != nullptr)
      return "field '" + spec.name + "_box' collides with the encoded form of '" + spec.name + "'";
    const at::Tensor& t = *field;
    if (t.scalar_type() != at::kFloat || t.dim() != 3 || t.size(0) != 3 || t.size(1) != spec.out_height ||
        t.size(2) != spec.out_width)
      return c10::str("field '", spec.name, "' is ", tensor_text(t), ", but encoded_images declares Float[3, ",
                      spec.out_height, ", ", spec.out_width, "]");
    const bool hwc = t.stride(0) == 1 && t.stride(1) == 3 * t.size(2) && t.stride(2) == 3;
    if (spec.channels_last != hwc && !(t.size(1) * t.size(2) == 1))
      return c10::str("field '", spec.name, "' has strides ", t.strides(), ", but encoded_images declares channels_last = ",
                      spec.channels_last ? "true" : "false");
  }
  return "";
}

std::string encoded_sample_problem(const std::vector<EncodedImageSpec>& specs, const NamedTensors& pixels,
                                   const NamedTensors& encoded) {
  // 1. Each available image as bytes and its box.
  for (const EncodedImageSpec& spec : specs) {
    if (!spec.available) continue;
    const at::Tensor* bytes = field_named(encoded, spec.name);
    const at::Tensor* box = field_named(encoded, spec.name + "_box");
    if (bytes == nullptr || box == nullptr)
      return "asked for encoded images, the sample has no field '" + spec.name + (bytes == nullptr ? "" : "_box") +
             "' (a field declared available is handed over encoded whenever asked, PLG-19)";
    if (bytes->scalar_type() != at::kByte || bytes->dim() != 1 || bytes->size(0) < 1)
      return "field '" + spec.name + "' is " + tensor_text(*bytes) + " when encoded, expected Byte[N] (the file's bytes)";
    if (std::string problem = box_problem(spec.name, *box); !problem.empty()) return problem;
  }
  // 2. Every other field as the pixel sample has it.
  NamedTensors rest_encoded, rest_pixels;
  for (const auto& f : encoded)
    if (!replaced_by_encoding(specs, f.first)) rest_encoded.push_back(f);
  for (const auto& f : pixels)
    if (!replaced_by_encoding(specs, f.first)) rest_pixels.push_back(f);
  if (rest_encoded.size() != rest_pixels.size())
    return c10::str("asked for encoded images, the sample has ", rest_encoded.size(),
                    " fields besides the encoded ones, the pixel sample ", rest_pixels.size(),
                    ": only the declared fields change");
  for (std::size_t i = 0; i < rest_pixels.size(); ++i) {
    const auto& [name, value] = rest_pixels[i];
    const auto& [encoded_name, encoded_value] = rest_encoded[i];
    if (name != encoded_name || value.scalar_type() != encoded_value.scalar_type() ||
        value.sizes() != encoded_value.sizes() || !at::equal(value, encoded_value))
      return "field '" + name + "' (" + tensor_text(value) + ") differs when encoded images are asked for (field '" +
             encoded_name + "', " + tensor_text(encoded_value) + "): only the declared fields change";
  }
  return "";
}

}  // namespace tp::detail
