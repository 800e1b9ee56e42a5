// ShearX/Y, TranslateX/Y and Rotate as torchvision.transforms.v2.functional.affine / rotate do
// them on uint8 tensors with nearest interpolation and fill 0: an inverse affine matrix in double
// (_get_inverse_affine_matrix), then a sampling grid and its un-normalisation in float32
// (_affine_grid + grid_sample, align_corners=False), rounded half-to-even to a source pixel.
// The float32 steps are reproduced in the same order so that the chosen source pixel agrees
// with torchvision's except where a coordinate lies within float rounding of a .5 boundary.
#include <array>
#include <cmath>

#include <opencv2/core.hpp>

#include "augment_ops.h"

namespace tp::datasets {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// Python's math.radians / math.degrees: one multiplication by a rounded constant.
double radians(double degrees) { return degrees * (kPi / 180.0); }
double degrees(double radians) { return radians * (180.0 / kPi); }

/// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale = 1, shear), line
/// for line: maps an output point (relative to the image centre) to its input point.
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                                     double shear_y) {
  const double rot = radians(angle), sx = radians(shear_x), sy = radians(shear_y);
  const double cos_sy = std::cos(sy), tan_sx = std::tan(sx);
  const double rot_minus_sy = rot - sy, cx_plus_tx = cx + tx, cy_plus_ty = cy + ty;
  const double a = std::cos(rot_minus_sy) / cos_sy;
  const double b = -(a * tan_sx + std::sin(rot));
  const double c = std::sin(rot_minus_sy) / cos_sy;
  const double d = std::cos(rot) - c * tan_sx;
  std::array<double, 6> m{d, -b, 0.0, -c, a, 0.0};
  m[2] += cx - m[0] * cx_plus_tx - m[1] * cy_plus_ty;
  m[5] += cy - m[3] * cx_plus_tx - m[4] * cy_plus_ty;
  return m;
}

/// Nearest-neighbour warp with torchvision's float32 grid: output pixel (x, y) reads input pixel
/// (round(ix), round(iy)) with ix = ((gx + 1) * w - 1) / 2, gx the normalised grid value, and 0
/// outside the image. Cost: a few float operations per output pixel plus a 3-byte copy.
cv::Mat warp_nearest(const cv::Mat& src, const std::array<double, 6>& m) {
  const int h = src.rows, w = src.cols;
  const auto half_w = static_cast<float>(0.5 * w), half_h = static_cast<float>(0.5 * h);
  // theta.transpose(1, 2) / [0.5 w, 0.5 h], in float32 as _affine_grid does.
  const float r00 = static_cast<float>(m[0]) / half_w, r10 = static_cast<float>(m[1]) / half_w,
              r20 = static_cast<float>(m[2]) / half_w;
  const float r01 = static_cast<float>(m[3]) / half_h, r11 = static_cast<float>(m[4]) / half_h,
              r21 = static_cast<float>(m[5]) / half_h;
  const auto fw = static_cast<float>(w), fh = static_cast<float>(h);
  cv::Mat dst(h, w, CV_8UC3, cv::Scalar::all(0));
  for (int y = 0; y < h; ++y) {
    const auto by = static_cast<float>(y) - static_cast<float>(h - 1) * 0.5f;  // exact half-integers
    auto* out = dst.ptr<unsigned char>(y);
    for (int x = 0; x < w; ++x) {
      const auto bx = static_cast<float>(x) - static_cast<float>(w - 1) * 0.5f;
      const float gx = bx * r00 + by * r10 + r20;
      const float gy = bx * r01 + by * r11 + r21;
      const float ix = std::nearbyint(((gx + 1.f) * fw - 1.f) / 2.f);
      const float iy = std::nearbyint(((gy + 1.f) * fh - 1.f) / 2.f);
      if (!(ix >= 0.f && ix < fw && iy >= 0.f && iy < fh)) continue;
      const unsigned char* in = src.ptr<unsigned char>(static_cast<int>(iy)) + 3 * static_cast<int>(ix);
      out[3 * x + 0] = in[0];
      out[3 * x + 1] = in[1];
      out[3 * x + 2] = in[2];
    }
  }
  return dst;
}

/// F.rotate(angle) without expand: torchvision's exact fast paths for multiples of 90 degrees
/// (90 and 270 only on square images), else the affine warp with -angle.
cv::Mat rotate(const cv::Mat& src, double angle) {
  angle = std::fmod(angle, 360.0);  // Python's `angle % 360`: result in [0, 360)
  if (angle < 0.0) angle += 360.0;
  cv::Mat out;
  if (angle == 0.0) return src.clone();
  if (angle == 180.0) {
    cv::rotate(src, out, cv::ROTATE_180);
    return out;
  }
  if (src.rows == src.cols && (angle == 90.0 || angle == 270.0)) {
    // torch.rot90(k=1) turns the image counter-clockwise.
    cv::rotate(src, out, angle == 90.0 ? cv::ROTATE_90_COUNTERCLOCKWISE : cv::ROTATE_90_CLOCKWISE);
    return out;
  }
  return warp_nearest(src, inverse_affine(0.0, 0.0, -angle, 0.0, 0.0, 0.0, 0.0));
}

}  // namespace

cv::Mat apply_geometric_op(const cv::Mat& bgr, AugOp op, double magnitude) {
  // ShearX/Y use center = [0, 0] (the top-left corner), i.e. center_f = -(w/2, h/2) relative to
  // the image centre; the shear angle is degrees(atan(magnitude)).
  const double cx = -0.5 * bgr.cols, cy = -0.5 * bgr.rows;
  const double shear = degrees(std::atan(magnitude));
  switch (op) {
    case AugOp::kShearX: return warp_nearest(bgr, inverse_affine(cx, cy, 0.0, 0.0, 0.0, shear, 0.0));
    case AugOp::kShearY: return warp_nearest(bgr, inverse_affine(cx, cy, 0.0, 0.0, 0.0, 0.0, shear));
    case AugOp::kTranslateX:
      return warp_nearest(bgr, inverse_affine(0.0, 0.0, 0.0, static_cast<double>(static_cast<int>(magnitude)), 0.0,
                                              0.0, 0.0));
    case AugOp::kTranslateY:
      return warp_nearest(bgr, inverse_affine(0.0, 0.0, 0.0, 0.0, static_cast<double>(static_cast<int>(magnitude)),
                                              0.0, 0.0));
    case AugOp::kRotate: return rotate(bgr, magnitude);
    default: return bgr.clone();
  }
}

}  // namespace tp::datasets
