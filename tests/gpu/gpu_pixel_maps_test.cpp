// A segmenter's per-pixel outputs on CUDA (pixel_maps.h): `host predict` and the inference library
// cut and resize each sample's map where the model left its output, on the device, then copy it to
// the CPU. The maps of a CUDA output equal those of the same output on the CPU: class ids exactly,
// bilinearly resized scores within float rounding (another kernel's summation order).
#include <ATen/ATen.h>

#include <vector>

#include "gpu/gpu_helpers.h"
#include "tp/framework/engine/pixel_maps.h"

#include <doctest/doctest.h>

TEST_CASE("pixel maps of a CUDA output equal the CPU's: cut to each sample, resized to its file") {
  REQUIRE_MESSAGE(at::hasCUDA(), tp::gpu_test::kNeedsCuda);
  const tp::BatchLayout layout({{"image", tp::Batching::kPad, 0.0}});
  // The collated batch stays on the CPU (as the predictor and the library hold it); the output is the model's.
  const tp::NamedTensors batch{
      {"image", at::zeros({3, 3, 24, 32})},
      {"image_lengths", at::tensor(std::vector<int64_t>{3, 24, 32, 3, 17, 29, 3, 24, 11}, at::kLong).reshape({3, 3})},
      {"orig_size", at::tensor(std::vector<int64_t>{48, 64, 17, 29, 40, 13}, at::kLong).reshape({3, 2})}};
  const at::Tensor scores = at::randn({3, 5, 24, 32});
  const at::Tensor ids = at::randint(0, 5, {3, 24, 32}, at::kLong);
  for (const at::Tensor& output : {scores, ids}) {
    const std::vector<at::Tensor> on_cpu = tp::pixel_maps(output, batch, layout, 3);
    const std::vector<at::Tensor> on_gpu = tp::pixel_maps(output.to(at::kCUDA), batch, layout, 3);
    REQUIRE(on_cpu.size() == 3);
    REQUIRE(on_gpu.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("sample " << i << (output.is_floating_point() ? " scores" : " ids"));
      CHECK(on_gpu[i].is_cpu());
      CHECK(on_gpu[i].sizes().vec() == on_cpu[i].sizes().vec());
      if (output.is_floating_point()) CHECK(at::allclose(on_gpu[i], on_cpu[i], 1e-5, 1e-5));
      else CHECK(at::equal(on_gpu[i], on_cpu[i]));
    }
    // Sample 0 was resized up to its file's 48 x 64, sample 2 cut to 24 x 11 and resized to 40 x 13.
    CHECK(on_gpu[0].size(-2) == 48);
    CHECK(on_gpu[2].size(-1) == 13);
  }
}
