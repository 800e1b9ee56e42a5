// A segmenter's per-pixel outputs sample by sample (pixel_maps.h): each map cut to its image's
// own size in a padded batch, then resized to the file's size (`orig_size`): scores as
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False), ids by nearest neighbour.
#include <doctest/doctest.h>

#include <ATen/ATen.h>

#include "tp/framework/engine/pixel_maps.h"
#include "tp/framework/error.h"

namespace {

at::Tensor sizes(std::vector<int64_t> values, int64_t columns) {
  return at::tensor(values, at::kLong).reshape({-1, columns});
}

tp::BatchLayout padded_image() { return tp::BatchLayout({{"image", tp::Batching::kPad, 0.0}}); }

}  // namespace

TEST_CASE("pixel maps: a padded sample is cut to its own size; scores go to the file's size bilinearly") {
  const at::Tensor scores = at::randn({3, 2, 6, 8});  // batch of 2 samples, repeated to 3 rows
  const tp::NamedTensors batch{{"image", at::zeros({3, 3, 6, 8})},
                               {"image_lengths", sizes({3, 6, 8, 3, 4, 5, 3, 4, 5}, 3)},
                               {"orig_size", sizes({12, 16, 4, 5, 4, 5}, 2)}};
  CHECK(tp::is_pixel_map(scores, batch));
  const std::vector<at::Tensor> maps = tp::pixel_maps(scores, batch, padded_image(), 2);
  REQUIRE(maps.size() == 2);  // the rows asked for, not the repeated third
  // Sample 0 fills the batch: its whole map, resized from 6 x 8 to the file's 12 x 16.
  CHECK(maps[0].sizes().vec() == std::vector<int64_t>{2, 12, 16});
  CHECK(at::equal(maps[0], at::upsample_bilinear2d(scores.narrow(0, 0, 1), {12, 16}, false)[0]));
  // Sample 1 is 4 x 5 inside the padding, and so is its file: cut, not resized.
  CHECK(maps[1].sizes().vec() == std::vector<int64_t>{2, 4, 5});
  CHECK(at::equal(maps[1], scores[1].narrow(1, 0, 4).narrow(2, 0, 5)));
}

TEST_CASE("pixel maps: bilinear resizing is align_corners = False, as torchvision's segmentation models upsample") {
  // interpolate([[0, 1]], size=(1, 4), mode="bilinear", align_corners=False) == [[0, 0.25, 0.75, 1]]
  const at::Tensor scores = at::tensor(std::vector<float>{0.F, 1.F}).reshape({1, 1, 1, 2});
  const tp::NamedTensors batch{{"image", at::zeros({1, 3, 1, 2})}, {"orig_size", sizes({1, 4}, 2)}};
  const std::vector<at::Tensor> maps = tp::pixel_maps(scores, batch, tp::BatchLayout(), 1);
  REQUIRE(maps.size() == 1);
  CHECK(at::allclose(maps[0], at::tensor(std::vector<float>{0.F, 0.25F, 0.75F, 1.F}).reshape({1, 1, 4})));
}

TEST_CASE("pixel maps: class ids are resized by nearest neighbour and stay integers") {
  const at::Tensor ids = at::arange(12, at::kLong).reshape({1, 3, 4});
  const tp::NamedTensors batch{{"image", at::zeros({1, 3, 3, 4})}, {"orig_size", sizes({6, 8}, 2)}};
  const std::vector<at::Tensor> maps = tp::pixel_maps(ids, batch, tp::BatchLayout(), 1);
  REQUIRE(maps.size() == 1);
  REQUIRE((maps[0].scalar_type() == at::kLong));
  REQUIRE(maps[0].sizes().vec() == std::vector<int64_t>{6, 8});
  for (int64_t y = 0; y < 6; ++y)
    for (int64_t x = 0; x < 8; ++x) CHECK(maps[0][y][x].item<int64_t>() == ids[0][y / 2][x / 2].item<int64_t>());
}

TEST_CASE("pixel maps: without padding or file sizes a map is its row; other outputs are no maps") {
  const at::Tensor scores = at::randn({2, 4, 5, 6});
  const tp::NamedTensors batch{{"image", at::zeros({2, 3, 5, 6})}};
  const std::vector<at::Tensor> maps = tp::pixel_maps(scores, batch, tp::BatchLayout(), 2);
  REQUIRE(maps.size() == 2);
  CHECK(at::equal(maps[1], scores[1]));
  // Class scores, a map of another size (a stride-8 feature map), a bool mask: none is a map of the image.
  CHECK_FALSE(tp::is_pixel_map(at::randn({2, 10}), batch));
  CHECK(tp::pixel_maps(at::randn({2, 4, 3, 3}), batch, tp::BatchLayout(), 2).empty());
  CHECK_FALSE(tp::is_pixel_map(at::zeros({2, 5, 6}, at::kBool), batch));
  CHECK(tp::is_pixel_map(at::zeros({2, 5, 6}, at::kLong), batch));
}

TEST_CASE("pixel maps: a file size that is not [B, 2] of sizes >= 1 is refused, naming the field") {
  const at::Tensor scores = at::randn({2, 1, 3, 3});
  for (const at::Tensor& bad : {sizes({3, 3}, 2), sizes({3, 3, 3, 3}, 1), sizes({3, 3, 0, 3}, 2)}) {
    const tp::NamedTensors batch{{"image", at::zeros({2, 3, 3, 3})}, {"orig_size", bad}};
    CHECK_THROWS_WITH_AS(tp::pixel_maps(scores, batch, tp::BatchLayout(), 2), doctest::Contains("orig_size"), tp::Error);
  }
}
