// detection: FCOS's anchors, torchvision's AnchorGenerator.generate_anchors and grid_anchors
// (anchors.h).
#include "anchors.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/meshgrid.h>
#include <ATen/ops/round.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>

namespace tp::detection {

at::Tensor fcos_anchors(const std::vector<at::Tensor>& levels, int64_t image_height, int64_t image_width) {
  TORCH_CHECK(!levels.empty() && levels.size() <= std::size(kAnchorSizes), "fcos_anchors: 1 to 5 levels, got ",
              levels.size());
  const at::TensorOptions options = levels[0].options();
  std::vector<at::Tensor> per_level;
  for (size_t l = 0; l < levels.size(); ++l) {
    const int64_t grid_h = levels[l].size(2), grid_w = levels[l].size(3);
    // generate_anchors(scales=(size,), aspect_ratios=(1.0,)): h_ratio = sqrt(1) = 1, so the
    // anchor is [-size, -size, size, size] / 2, rounded, computed in float32 then cast. Made
    // on the device (a fill), not copied from the host (a pageable copy waits for the stream).
    const at::Tensor size = at::scalar_tensor(static_cast<double>(kAnchorSizes[l]), options.dtype(at::kFloat));
    const at::Tensor base = at::round(at::stack({-size, -size, size, size}) / 2).to(options);
    const at::Tensor shifts_x = at::arange(0, grid_w, options.dtype(at::kInt)) * (image_width / grid_w);
    const at::Tensor shifts_y = at::arange(0, grid_h, options.dtype(at::kInt)) * (image_height / grid_h);
    const std::vector<at::Tensor> grid = at::meshgrid({shifts_y, shifts_x}, "ij");
    const at::Tensor shift_y = grid[0].reshape(-1), shift_x = grid[1].reshape(-1);
    const at::Tensor shifts = at::stack({shift_x, shift_y, shift_x, shift_y}, 1);
    per_level.push_back((shifts.view({-1, 1, 4}) + base.view({1, -1, 4})).reshape({-1, 4}));
  }
  return at::cat(per_level, 0);
}

}  // namespace tp::detection
