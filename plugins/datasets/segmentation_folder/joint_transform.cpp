#include "joint_transform.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>

#include "rng.h"

namespace tp::segmentation_folder {
namespace {

using datasets::Rng;

/// Streams of the decisions image_folder does not make (its tags 1-10 keep their meaning here:
/// kTagCrop is the RandomResizedCrop box, kTagFlip the mirror, 3-5 the jitter factors). Fixed
/// forever: changing one changes every augmented sample of every run that used it.
enum : uint64_t {
  kTagRandomResize = 11,  ///< RandomResize: the shorter side
  kTagRandomCrop = 12,    ///< the crop offsets after padding (top, then left)
};

/// The h x w window of `src` at (top, left), which may reach past any edge: those pixels are
/// `fill`. Only the overlap is copied.
cv::Mat window(const cv::Mat& src, int top, int left, int h, int w, const cv::Scalar& fill) {
  cv::Mat out(h, w, src.type(), fill);
  const int y0 = std::max(top, 0), x0 = std::max(left, 0);
  const int y1 = std::min(top + h, src.rows), x1 = std::min(left + w, src.cols);
  if (y1 > y0 && x1 > x0)
    src(cv::Rect(x0, y0, x1 - x0, y1 - y0)).copyTo(out(cv::Rect(x0 - left, y0 - top, x1 - x0, y1 - y0)));
  return out;
}

/// Source index of each of `out` destination positions along one axis of `in` (torch's
/// nearest_idx with float32 scale).
std::vector<int> nearest_indices(int in, int out) {
  std::vector<int> idx(static_cast<std::size_t>(out));
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int o = 0; o < out; ++o) {
    if (out == in) idx[o] = o;
    else if (out == 2 * in) idx[o] = o >> 1;
    else idx[o] = std::min(static_cast<int>(std::floor(static_cast<float>(o) * scale)), in - 1);
  }
  return idx;
}

}  // namespace

Size2 shorter_side_to(int height, int width, int s) {
  const bool portrait = height >= width;
  const int shorter = portrait ? width : height, longer = portrait ? height : width;
  const int new_long = static_cast<int>(static_cast<int64_t>(s) * longer / shorter);
  return portrait ? Size2{new_long, s} : Size2{s, new_long};
}

cv::Mat resize_nearest(const cv::Mat& mask, int h, int w) {
  if (mask.rows == h && mask.cols == w) return mask;
  const std::vector<int> ys = nearest_indices(mask.rows, h), xs = nearest_indices(mask.cols, w);
  cv::Mat out(h, w, CV_8UC1);
  for (int y = 0; y < h; ++y) {
    const unsigned char* in = mask.ptr<unsigned char>(ys[static_cast<std::size_t>(y)]);
    unsigned char* row = out.ptr<unsigned char>(y);
    for (int x = 0; x < w; ++x) row[x] = in[xs[static_cast<std::size_t>(x)]];
  }
  return out;
}

JointPlan plan_joint(int height, int width, const JointOptions& o, uint64_t seed) {
  JointPlan p;
  p.sized = {height, width};
  // 1. The size step.
  if (o.random && o.random_resized_crop.set()) {
    Rng rng(seed, datasets::kTagCrop);
    p.crop_first = true;
    p.box = datasets::random_resized_crop_box(height, width, o.scale, o.ratio, rng);
    p.sized = o.random_resized_crop;
  } else if (o.random && o.random_resize[1] > 0) {
    const int lo = o.random_resize[0], hi = o.random_resize[1];
    p.sized = shorter_side_to(height, width, lo + Rng(seed, kTagRandomResize).below(hi - lo));
  } else if (o.resize_short > 0) {
    p.sized = shorter_side_to(height, width, o.resize_short);
  } else if (o.resize.set()) {
    p.sized = o.resize;
  }
  if (!o.random) return p;
  // 2. Flip, 3. pad and crop (RandomCrop.make_params: top then left, each uniform), 4. jitter.
  p.flip = o.hflip > 0.0 && Rng(seed, datasets::kTagFlip).uniform() < o.hflip;
  if (o.crop.set()) {
    p.crop = o.crop;
    p.pad_bottom = std::max(o.crop.h - p.sized.h, 0);
    p.pad_right = std::max(o.crop.w - p.sized.w, 0);
    Rng rng(seed, kTagRandomCrop);
    p.crop_top = rng.below(p.sized.h + p.pad_bottom - o.crop.h + 1);
    p.crop_left = rng.below(p.sized.w + p.pad_right - o.crop.w + 1);
  }
  p.jitter = o.brightness > 0.0 || o.contrast > 0.0 || o.saturation > 0.0;
  p.factors = datasets::draw_jitter(o.brightness, o.contrast, o.saturation, seed);
  return p;
}

JointImage apply_geometry(const cv::Mat& bgr, const cv::Mat& mask, const JointPlan& plan, int ignore_index) {
  cv::Mat image = bgr, ids = mask;
  if (plan.crop_first) {
    const cv::Rect box(plan.box.x, plan.box.y, plan.box.w, plan.box.h);
    image = image(box);
    ids = ids(box);
  }
  image = datasets::resize_bgr(image, plan.sized.h, plan.sized.w);
  ids = resize_nearest(ids, plan.sized.h, plan.sized.w);
  JointImage out;
  out.flip_pending = plan.flip;
  if (plan.crop.set()) {
    // Crop of the mirrored, right-padded image at column `left` = mirror of the crop of the
    // unmirrored image at column W - left - w, padded on the left instead.
    const int left = plan.flip ? plan.sized.w - plan.crop_left - plan.crop.w : plan.crop_left;
    image = window(image, plan.crop_top, left, plan.crop.h, plan.crop.w, cv::Scalar::all(0));
    ids = window(ids, plan.crop_top, left, plan.crop.h, plan.crop.w, cv::Scalar::all(ignore_index));
  }
  out.bgr = image;
  if (plan.flip) cv::flip(ids, out.mask, 1);  // into a new Mat: `ids` may still be the caller's mask
  else out.mask = ids;
  return out;
}

JointSample transform_pair(const cv::Mat& bgr, const cv::Mat& mask, const JointOptions& o, uint64_t seed) {
  const JointPlan plan = plan_joint(bgr.rows, bgr.cols, o, seed);
  const JointImage g = apply_geometry(bgr, mask, plan, o.ignore_index);
  JointSample out;
  out.h = g.bgr.rows;
  out.w = g.bgr.cols;
  out.pixels.resize(static_cast<std::size_t>(3) * out.h * out.w);
  datasets::PixelFormat chw = o.format;
  chw.channels_last = false;
  datasets::write_pixels(g.bgr, g.flip_pending, chw, plan.jitter ? &plan.factors : nullptr, out.pixels.data());
  out.mask.resize(static_cast<std::size_t>(out.h) * out.w);
  std::size_t at = 0;
  for (int y = 0; y < out.h; ++y) {
    const unsigned char* row = g.mask.ptr<unsigned char>(y);
    for (int x = 0; x < out.w; ++x) out.mask[at++] = row[x];
  }
  return out;
}

}  // namespace tp::segmentation_folder
