// `host plugins check`'s checks of a dataset's encoded images (plugin ABI 1.11,
// tp_encoded_image_t; framework/src/plugin/encoded_sample_check.h): the declaration as the loader
// reads it plus the reason-only-when-unavailable rule, the pixel sample it describes, and the
// encoded sample of the same index and seed. Each broken rule is refused with what is wrong.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plugin/encoded_sample_check.h"
#include "support/doctest_after_torch.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"

namespace {

using tp::EncodedImageSpec;
using tp::NamedTensors;

tp_encoded_image_t available_entry(const char* name = "image") {
  tp_encoded_image_t e{};
  e.struct_size = sizeof(tp_encoded_image_t);
  e.available = 1;
  e.name = name;
  e.out_height = 4;
  e.out_width = 5;
  for (int c = 0; c < 3; ++c) e.std[c] = 1.0F;
  return e;
}

std::string declaration_refusal(const std::vector<tp_encoded_image_t>& entries) {
  try {
    (void)tp::DatasetProxy::parse_encoded_images(entries.data(), static_cast<uint32_t>(entries.size()));
  } catch (const tp::Error& e) {
    return e.what();
  }
  return "";
}

EncodedImageSpec spec_4x5(bool channels_last = false) {
  EncodedImageSpec s;
  s.name = "image";
  s.available = true;
  s.out_height = 4;
  s.out_width = 5;
  s.channels_last = channels_last;
  return s;
}

at::Tensor box(std::vector<int32_t> values) {
  return at::tensor(values, at::kInt);
}

NamedTensors pixel_sample() {
  return {{"image", at::zeros({3, 4, 5})}, {"label", at::scalar_tensor(2, at::kLong)}};
}

NamedTensors encoded_sample(at::Tensor image_box, at::Tensor bytes = at::ones({9}, at::kByte)) {
  return {{"image", bytes}, {"image_box", image_box}, {"label", at::scalar_tensor(2, at::kLong)}};
}

}  // namespace

TEST_CASE("encoded_images: a well-formed declaration is read; an available entry with a reason is refused") {
  const std::vector<tp_encoded_image_t> one = {available_entry()};
  const std::vector<EncodedImageSpec> specs = tp::DatasetProxy::parse_encoded_images(one.data(), 1);
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].name == "image");
  CHECK(specs[0].out_width == 5);
  CHECK(tp::detail::encoded_images_text(specs) == "image [4, 5]");

  tp_encoded_image_t off{};
  off.struct_size = sizeof(tp_encoded_image_t);
  off.name = "depth";
  off.reason = "d: rand_augment changes decoded pixels";
  const std::vector<tp_encoded_image_t> two = {available_entry(), off};
  CHECK(declaration_refusal(two).empty());
  CHECK(tp::detail::encoded_images_text(tp::DatasetProxy::parse_encoded_images(two.data(), 2)) ==
        "image [4, 5], depth on the CPU (d: rand_augment changes decoded pixels)");

  tp_encoded_image_t with_reason = available_entry();
  with_reason.reason = "oops";
  CHECK(declaration_refusal({with_reason}).find("available but has a reason") != std::string::npos);
  // The loader's own refusals come through (DatasetProxy::parse_encoded_images).
  CHECK(declaration_refusal({available_entry(), available_entry()}).find("twice") != std::string::npos);
  tp_encoded_image_t no_size = available_entry();
  no_size.out_height = 0;
  CHECK(!declaration_refusal({no_size}).empty());
  tp_encoded_image_t no_reason = off;
  no_reason.reason = nullptr;
  CHECK(!declaration_refusal({no_reason}).empty());
  tp_encoded_image_t small = available_entry();
  small.struct_size = 16;
  CHECK(!declaration_refusal({small}).empty());
}

TEST_CASE("encoded_images: the pixel sample is a field of the declared shape and layout") {
  const std::vector<EncodedImageSpec> specs = {spec_4x5()};
  CHECK(tp::detail::pixel_sample_problem(specs, pixel_sample()).empty());
  CHECK(tp::detail::pixel_sample_problem({}, pixel_sample()).empty());

  EncodedImageSpec missing = spec_4x5();
  missing.name = "photo";
  CHECK(tp::detail::pixel_sample_problem({missing}, pixel_sample()).find("'photo', which is not a field") !=
        std::string::npos);
  const NamedTensors wrong_size = {{"image", at::zeros({3, 5, 4})}};
  CHECK(tp::detail::pixel_sample_problem(specs, wrong_size).find("declares Float[3, 4, 5]") != std::string::npos);
  const NamedTensors wrong_dtype = {{"image", at::zeros({3, 4, 5}, at::kDouble)}};
  CHECK(!tp::detail::pixel_sample_problem(specs, wrong_dtype).empty());
  // HWC memory (strides {1, 3 W, 3}) only when channels_last is declared.
  const NamedTensors hwc = {{"image", at::zeros({4, 5, 3}).permute({2, 0, 1})}};
  CHECK(tp::detail::pixel_sample_problem({spec_4x5(true)}, hwc).empty());
  CHECK(tp::detail::pixel_sample_problem(specs, hwc).find("channels_last = false") != std::string::npos);
  CHECK(tp::detail::pixel_sample_problem({spec_4x5(true)}, pixel_sample()).find("channels_last = true") !=
        std::string::npos);
  NamedTensors collides = pixel_sample();
  collides.emplace_back("image_box", at::zeros({7}, at::kInt));
  CHECK(tp::detail::pixel_sample_problem(specs, collides).find("collides") != std::string::npos);
  // An unavailable field only has to exist.
  EncodedImageSpec off = spec_4x5();
  off.available = false;
  CHECK(tp::detail::pixel_sample_problem({off}, wrong_size).empty());
}

TEST_CASE("encoded_images: the encoded sample has the bytes, a box inside the image, and every other field unchanged") {
  const std::vector<EncodedImageSpec> specs = {spec_4x5()};
  const NamedTensors pixels = pixel_sample();
  const auto problem = [&](const NamedTensors& encoded) {
    return tp::detail::encoded_sample_problem(specs, pixels, encoded);
  };
  CHECK(problem(encoded_sample(box({2, 3, 10, 9, 1, 12, 14}))).empty());
  CHECK(problem(encoded_sample(box({0, 0, 14, 12, 0, 12, 14}))).empty());  // the whole image
  CHECK(problem(encoded_sample(box({0, 0, 0, 0, 1, 0, 0}))).empty());      // size unknown: pixels asked later

  CHECK(problem(encoded_sample(box({2, 3, 10, 9, 2, 12, 14}))).find("flip must be 0 or 1") != std::string::npos);
  CHECK(problem(encoded_sample(box({2, 3, 15, 9, 0, 12, 14}))).find("inside the image") != std::string::npos);
  CHECK(problem(encoded_sample(box({5, 3, 5, 9, 0, 12, 14}))).find("inside the image") != std::string::npos);
  CHECK(problem(encoded_sample(box({0, 0, 1, 1, 0, 12, 0}))).find("must both be > 0, or both 0") != std::string::npos);
  CHECK(problem(encoded_sample(box({0, 0, 1, 1, 0, 12}))).find("expected Int[7]") != std::string::npos);
  CHECK(problem(encoded_sample(at::zeros({7}, at::kLong))).find("expected Int[7]") != std::string::npos);
  CHECK(problem(encoded_sample(box({0, 0, 1, 1, 0, 2, 2}), at::zeros({0}, at::kByte))).find("expected Byte[N]") !=
        std::string::npos);
  CHECK(problem(encoded_sample(box({0, 0, 1, 1, 0, 2, 2}), at::zeros({3, 4, 5}))).find("expected Byte[N]") !=
        std::string::npos);
  // Asked for the encoded form, a field declared available is handed over encoded (PLG-19).
  CHECK(problem(pixels).find("no field 'image_box'") != std::string::npos);
  // Every other field as in the pixel sample: values, and no field added or lost.
  NamedTensors other_label = encoded_sample(box({0, 0, 1, 1, 0, 2, 2}));
  other_label[2].second = at::scalar_tensor(1, at::kLong);
  CHECK(problem(other_label).find("field 'label'") != std::string::npos);
  NamedTensors extra = encoded_sample(box({0, 0, 1, 1, 0, 2, 2}));
  extra.emplace_back("depth", at::zeros({1}));
  CHECK(problem(extra).find("besides the encoded ones") != std::string::npos);
  // An unavailable field stays pixels and is compared like any other.
  EncodedImageSpec off = spec_4x5();
  off.available = false;
  CHECK(tp::detail::encoded_sample_problem({off}, pixels, pixels).empty());
  CHECK(!tp::detail::encoded_sample_problem({off}, pixels, encoded_sample(box({0, 0, 1, 1, 0, 2, 2}))).empty());
}
