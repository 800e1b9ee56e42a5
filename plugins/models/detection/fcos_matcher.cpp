// detection: FCOS's matching (fcos_matcher.h).
#include "fcos_matcher.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <limits>

namespace tp::detection {

at::Tensor match_anchors(const at::Tensor& anchors, const at::Tensor& num_anchors_per_level, const at::Tensor& boxes,
                         const at::Tensor& offsets, double center_sampling_radius) {
  const int64_t num_anchors = anchors.size(0), num_boxes = boxes.size(0), batch = offsets.size(0) - 1;
  const auto long_options = anchors.options().dtype(at::kLong);
  if (num_boxes == 0) return at::full({batch, num_anchors}, -1, long_options);

  const at::Tensor anchor_cx = (anchors.select(1, 0) + anchors.select(1, 2)) / 2;
  const at::Tensor anchor_cy = (anchors.select(1, 1) + anchors.select(1, 3)) / 2;
  const at::Tensor anchor_sizes = anchors.select(1, 2) - anchors.select(1, 0);
  const at::Tensor x0 = boxes.select(1, 0).unsqueeze(0), y0 = boxes.select(1, 1).unsqueeze(0);
  const at::Tensor x1 = boxes.select(1, 2).unsqueeze(0), y1 = boxes.select(1, 3).unsqueeze(0);
  const at::Tensor gt_cx = (x0 + x1) / 2, gt_cy = (y0 + y1) / 2;
  const at::Tensor x = anchor_cx.unsqueeze(1), y = anchor_cy.unsqueeze(1);  // [A, 1]

  // Centre sampling: per axis within radius x anchor size of the box's centre. torchvision takes
  // the max over a stacked (x, y) pair and the min / max over four stacked distances; the
  // elementwise maximum / minimum of the parts are the same values without the [A, M, 4] tensor.
  at::Tensor match = at::maximum((x - gt_cx).abs_(), (y - gt_cy).abs_()) < (anchor_sizes * center_sampling_radius).unsqueeze(1);
  const at::Tensor left = x - x0, top = y - y0, right = x1 - x, bottom = y1 - y;
  match &= at::minimum(at::minimum(left, top), at::minimum(right, bottom)) > 0;  // inside the box
  // The level's scale range; the first level from 0, the last without bound.
  const at::Tensor level =
      at::searchsorted(at::cumsum(num_anchors_per_level, 0), at::arange(num_anchors, long_options), false, true);
  const int64_t last_level = num_anchors_per_level.size(0) - 1;
  const at::Tensor lower = at::where(level == 0, at::zeros({}, anchor_sizes.options()), anchor_sizes * 4);
  const at::Tensor upper = at::where(level == last_level,
                                     at::scalar_tensor(std::numeric_limits<double>::infinity(), anchor_sizes.options()),
                                     anchor_sizes * 8);
  const at::Tensor reach = at::maximum(at::maximum(left, top), at::maximum(right, bottom));
  match &= (reach > lower.unsqueeze(1)).logical_and_(reach < upper.unsqueeze(1));

  // The smallest box wins: torchvision scores a match 1e8 - area, in float32.
  const at::Tensor gt_areas = (x1 - x0) * (y1 - y0);  // [1, M]
  const at::Tensor value = match.to(at::kFloat) * at::rsub(gt_areas, 1e8);  // [A, M]
  // Each box's image; then per (anchor, image) the best value and the first box holding it.
  const at::Tensor image_of_box =
      at::searchsorted(offsets, at::arange(num_boxes, long_options), false, true) - 1;
  const at::Tensor index = image_of_box.unsqueeze(0).expand({num_anchors, num_boxes});
  const at::Tensor best =
      at::zeros({num_anchors, batch}, value.options()).scatter_reduce(1, index, value, "amax", /*include_self=*/true);
  const at::Tensor column = at::arange(num_boxes, long_options).unsqueeze(0).expand({num_anchors, num_boxes});
  const at::Tensor holds_best = value == best.gather(1, index);
  const at::Tensor first = at::full({num_anchors, batch}, num_boxes, long_options)
                               .scatter_reduce(1, index, at::where(holds_best, column, num_boxes), "amin", true);
  // Unmatched anchors (best value below 1e-5, including images without boxes) are -1.
  return at::where(best < 1e-5, -1, first).t().contiguous();
}

}  // namespace tp::detection
