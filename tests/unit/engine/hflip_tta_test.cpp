// `host predict --tta hflip`'s combination of the plain and the mirrored pass (hflip_tta.h): a
// segmentation score map from mirrored images is flipped back before the mean, so the result is
// the mean of two predictions of the same pixel; class scores are averaged as they are.
#include <doctest/doctest.h>

#include <ATen/ATen.h>

#include "engine/prediction/hflip_tta.h"
#include "tp/framework/engine/pixel_maps.h"
#include "tp/framework/error.h"

namespace {

// A "model" that is exactly mirror-equivariant per pixel (scores depend on the pixel's own value),
// applied to an image and to its mirror image.
at::Tensor pixel_scores(const at::Tensor& image) { return at::cat({image, -image, image * image}, 1); }

}  // namespace

TEST_CASE("hflip TTA: a [B, C, H, W] score map of the mirrored images is flipped back, then averaged") {
  const at::Tensor image = at::arange(2 * 1 * 3 * 5, at::kFloat).reshape({2, 1, 3, 5});
  const at::Tensor plain = pixel_scores(image);
  const at::Tensor mirrored = pixel_scores(at::flip(image, {-1}));
  // An equivariant model's two passes agree pixel for pixel once aligned: TTA changes nothing.
  CHECK(at::equal(tp::hflip_tta_mean(plain, mirrored), plain));
  // In general, pixel (h, w) averages the plain pass at w and the mirrored pass at W - 1 - w.
  const at::Tensor a = at::randn({2, 4, 3, 5}), b = at::randn({2, 4, 3, 5});
  const at::Tensor mean = tp::hflip_tta_mean(a, b);
  for (int64_t w = 0; w < 5; ++w) {
    INFO("w = " << w);
    CHECK(at::allclose(mean.select(3, w), (a.select(3, w) + b.select(3, 4 - w)) / 2));
  }
}

TEST_CASE("hflip TTA: class scores are averaged sample by sample; integer outputs keep the plain pass") {
  const at::Tensor a = at::randn({4, 10}), b = at::randn({4, 10});
  CHECK(at::allclose(tp::hflip_tta_mean(a, b), (a + b) / 2));
  const at::Tensor features = at::randn({4, 3, 7}), other = at::randn({4, 3, 7});
  CHECK(at::allclose(tp::hflip_tta_mean(features, other), (features + other) / 2));
  const at::Tensor ids = at::randint(0, 5, {2, 3, 5}, at::kLong);
  CHECK(at::equal(tp::hflip_tta_mean(ids, at::zeros_like(ids)), ids));
}

TEST_CASE("hflip TTA: passes of different shapes are refused, naming both") {
  try {
    tp::hflip_tta_mean(at::zeros({2, 4, 3, 5}), at::zeros({2, 4, 3, 6}));
    FAIL("no error");
  } catch (const tp::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("[2, 4, 3, 5]") != std::string::npos);
    CHECK(message.find("[2, 4, 3, 6]") != std::string::npos);
  }
}

// A segmentation trial's val images differ in size, so their batches are padded: TTA was refused.
TEST_CASE("hflip TTA in a padded batch: each image mirrored within its own width, its map flipped back so") {
  const tp::BatchLayout layout({{"image", tp::Batching::kPad, 0.0}});
  at::Tensor image = at::arange(2 * 1 * 3 * 5, at::kFloat).reshape({2, 1, 3, 5}) + 1;
  image[1].narrow(-1, 3, 2).zero_();  // sample 1 is 3 wide: columns 3 and 4 are padding
  image[1].narrow(-2, 2, 1).zero_();  // and 2 high
  const tp::NamedTensors batch{{"image", image},
                               {"image_lengths", at::tensor(std::vector<int64_t>{1, 3, 5, 1, 2, 3}).reshape({2, 3})}};
  const tp::NamedTensors mirrored = tp::mirrored_batch(batch, layout);
  const at::Tensor& flipped = mirrored[0].second;
  // Sample 0 fills the batch: mirrored whole. Sample 1: its 3 columns reversed, the padding in place.
  CHECK(at::equal(flipped[0], at::flip(image[0], {-1})));
  CHECK(at::equal(flipped[1].narrow(-1, 0, 3), at::flip(image[1].narrow(-1, 0, 3), {-1})));
  CHECK(at::equal(flipped[1].narrow(-1, 3, 2), at::zeros({1, 3, 2})));
  CHECK(at::equal(mirrored[1].second, batch[1].second));  // the lengths are not an image
  // A mirror-equivariant per-pixel model: TTA changes nothing once aligned within each width.
  const at::Tensor sizes = tp::pixel_map_sizes(at::zeros({2, 4, 3, 5}), batch, layout);
  REQUIRE(sizes.defined());
  const at::Tensor widths = sizes.select(1, 1);
  CHECK(at::equal(widths, at::tensor(std::vector<int64_t>{5, 3})));
  const at::Tensor plain = pixel_scores(image);
  CHECK(at::equal(tp::hflip_tta_mean(plain, pixel_scores(flipped), widths), plain));
  // Flipped back whole, sample 1's map would land 2 columns off (on its padding's side).
  CHECK_FALSE(at::equal(tp::hflip_tta_mean(plain, pixel_scores(flipped)), plain));
  // An output of another width than any padded field has no own widths: flipped whole.
  CHECK_FALSE(tp::pixel_map_sizes(at::zeros({2, 4, 3, 4}), batch, layout).defined());
}
