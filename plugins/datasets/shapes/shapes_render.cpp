// Rendering of one `shapes` sample. The shape is drawn once, anti-aliased, into an 8-bit
// coverage map; both views are composited from that map and the mask is its threshold, so the
// two views, the mask and the box always describe the same geometry.
#include "shapes_render.h"

#include "tp/cpp/random.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace tp::shapes {
namespace {

constexpr float kTwoPi = 6.2831853f;
// OpenCV draws with 4 fractional bits, so position and size vary continuously rather than in
// whole pixels (otherwise small shapes come in a handful of pixel-exact variants).
constexpr int kShift = 4;
constexpr float kFixedOne = static_cast<float>(1 << kShift);
// Circumradius range as a fraction of S: 7 to 12.8 px at S = 32, so even the smallest shape
// spans ~12 px and stays recognisable under noise, while the size alone says nothing of the class.
constexpr float kMinRadius = 0.22f;
constexpr float kMaxRadius = 0.4f;
// A circle of the full circumradius would always look bigger than the polygons inscribed in
// the same circle; shrinking it keeps the area ranges of the classes overlapping.
constexpr float kCircleScale = 0.85f;
// Triangles are irregular: each vertex moves by up to this angle (radians) and loses up to
// this fraction of its radius, so "triangle" is a class of shapes rather than one template.
constexpr float kTriangleAngleJitter = 0.3f;
constexpr float kTriangleRadiusJitter = 0.15f;
// Colours are random, but the shape is always brighter than its background by at least this
// much luma (in [0, 1] units); draws below it are retried. Rationale: with free polarity a small
// global-pooling CNN (3 conv-BN-ReLU-pool blocks, AdamW 3e-3, batch 64) was still below 50%
// after 5 epochs; with a fixed polarity it reaches 98% after 300 steps (3.2 epochs). The task
// stays about shape rather than colour constancy.
constexpr float kMinContrast = 0.35f;
constexpr int kContrastAttempts = 64; // P(retry) ~ 0.8 per draw, so ~1e-6 of views hit the fallback
// Linear background shading, per axis, across the whole image.
constexpr float kMaxGradient = 0.15f;
// Coverage at or above this (of 255) counts as inside the shape: the pixel centre is inside.
constexpr uint8_t kMaskThreshold = 128;

/// Colours and shading of one view.
struct ViewStyle {
  float fg[3];
  float bg[3];
  float grad_x;
  float grad_y;
};

cv::Point to_fixed(float x, float y) {
  return {cvRound(x * kFixedOne), cvRound(y * kFixedOne)};
}

/// Draws a shape of class `cls` centred at (cx, cy) into `coverage` (CV_8U, zeroed) as 0..255
/// anti-aliased coverage. Consumes random numbers only for triangles.
void draw_shape(cv::Mat& coverage, int64_t cls, float cx, float cy, float radius, float angle,
                cv::RNG& rng) {
  const cv::Scalar kFull(255);
  if (cls == kCircle) {
    cv::circle(coverage, to_fixed(cx, cy), cvRound(radius * kCircleScale * kFixedOne), kFull,
               cv::FILLED, cv::LINE_AA, kShift);
    return;
  }
  cv::Point corners[4];
  const int n = cls == kSquare ? 4 : 3;
  for (int k = 0; k < n; ++k) {
    float a = angle + kTwoPi * static_cast<float>(k) / static_cast<float>(n);
    float r = radius;
    if (cls == kTriangle) {
      a += rng.uniform(-kTriangleAngleJitter, kTriangleAngleJitter);
      r *= 1.0f - rng.uniform(0.0f, kTriangleRadiusJitter);
    }
    corners[k] = to_fixed(cx + r * std::cos(a), cy + r * std::sin(a));
  }
  cv::fillConvexPoly(coverage, corners, n, kFull, cv::LINE_AA, kShift);
}

/// Rec. 601 luma of an RGB colour in [0, 1].
float luma(const float* rgb) { return 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]; }

ViewStyle draw_style(cv::RNG& rng) {
  ViewStyle s{};
  bool found = false;
  for (int attempt = 0; attempt < kContrastAttempts && !found; ++attempt) {
    for (float& c : s.fg) c = rng.uniform(0.0f, 1.0f);
    for (float& c : s.bg) c = rng.uniform(0.0f, 1.0f);
    const float difference = luma(s.fg) - luma(s.bg);
    found = std::abs(difference) >= kMinContrast;
    if (found && difference < 0) std::swap(s.fg, s.bg); // the brighter colour draws the shape
  }
  if (!found) { // deterministic light-on-dark fallback
    for (float& c : s.fg) c = 0.9f;
    for (float& c : s.bg) c = 0.1f;
  }
  s.grad_x = rng.uniform(-kMaxGradient, kMaxGradient);
  s.grad_y = rng.uniform(-kMaxGradient, kMaxGradient);
  return s;
}

/// Adds `sigma` times approximately N(0, 1) noise to dst[0, n): each value is the centred sum of
/// four 8-bit uniforms (Irwin-Hall, n = 4: tails stop at 3.5 sigma, steps of sigma / 148, both
/// invisible at our noise levels). One counter-based splitmix64 call gives two values and the
/// calls have no serial dependency: 3.5x faster than OpenCV's ziggurat fill (19 vs 66 us per
/// sample), which had been about 2/3 of a sample's cost.
void add_noise(float* dst, size_t n, float sigma, uint64_t stream) {
  // The sum of four uniforms on {0..255} has mean 510 and std 256 / sqrt(3).
  const float scale = sigma * 1.7320508f / 256.0f;
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t bits = tp::cpp::splitmix64(stream + i * 0x9E3779B97F4A7C15ull);
    // Byte sums of both 32-bit halves at once (SWAR): pairs of bytes, then pairs of pairs.
    const uint64_t pairs = (bits & 0x00FF00FF00FF00FFull) + ((bits >> 8) & 0x00FF00FF00FF00FFull);
    const uint64_t quads = (pairs & 0x0000FFFF0000FFFFull) + ((pairs >> 16) & 0x0000FFFF0000FFFFull);
    dst[i] += scale * static_cast<float>(static_cast<int32_t>(quads & 0xFFFF) - 510);
    if (i + 1 < n) dst[i + 1] += scale * static_cast<float>(static_cast<int32_t>(quads >> 32) - 510);
  }
}

/// Composites one normalised CHW view from `alpha` (S*S coverage in [0, 1]) with independent
/// noise drawn from `rng`.
std::vector<float> compose_view(const ViewStyle& style, const std::vector<float>& alpha, int size,
                                float noise, cv::RNG& rng) {
  const size_t plane = static_cast<size_t>(size) * size;
  std::vector<float> out(3 * plane);
  // Two statements: the order of two calls within one expression is unspecified in C++.
  uint64_t stream = static_cast<uint64_t>(rng.next()) << 32;
  stream |= rng.next();
  const float inv_size = 1.0f / static_cast<float>(size);
  for (int c = 0; c < 3; ++c) {
    float* dst = out.data() + c * plane;
    for (int y = 0; y < size; ++y) {
      const float shade_y = style.grad_y * (static_cast<float>(y) * inv_size - 0.5f);
      for (int x = 0; x < size; ++x) {
        const size_t i = static_cast<size_t>(y) * size + x;
        const float bg = style.bg[c] + shade_y + style.grad_x * (static_cast<float>(x) * inv_size - 0.5f);
        dst[i] = bg + alpha[i] * (style.fg[c] - bg);
      }
    }
  }
  if (noise > 0) add_noise(out.data(), out.size(), noise, stream);
  const float inv_std = 1.0f / kPixelStd;
  for (float& v : out) v = (v - kPixelMean) * inv_std;
  return out;
}

template <typename T>
void mirror_rows(std::vector<T>& planes, int size) {
  for (size_t row = 0; row < planes.size(); row += static_cast<size_t>(size))
    std::reverse(planes.begin() + static_cast<std::ptrdiff_t>(row),
                 planes.begin() + static_cast<std::ptrdiff_t>(row + size));
}

// Segmentation shapes are smaller than the classification ones (4.8 to 9.6 px at S = 32) so that
// several fit in one image and still overlap only sometimes.
constexpr float kMinSegmentRadius = 0.15f;
constexpr float kMaxSegmentRadius = 0.3f;
// Detection shapes: 0.1 to 0.22 S in radius (at S = 96, boxes of about 15 to 40 px), small enough
// that several fit, large enough for a stride-8 feature map to place them.
constexpr float kMinDetectRadius = 0.1f;
constexpr float kMaxDetectRadius = 0.22f;
/// A detection shape whose visible pixels are fewer than this share of those it drew is dropped
/// from the boxes: later shapes hide it.
constexpr double kMinVisibleShare = 0.3;

/// A shape colour brighter than `bg` by at least kMinContrast in luma; `fallback` (which is) when
/// kContrastAttempts draws find none.
std::array<float, 3> draw_foreground(const float* bg, const float* fallback, cv::RNG& rng) {
  std::array<float, 3> fg{};
  for (int attempt = 0; attempt < kContrastAttempts; ++attempt) {
    for (float& c : fg) c = rng.uniform(0.0f, 1.0f);
    if (luma(fg.data()) - luma(bg) >= kMinContrast) return fg;
  }
  return {fallback[0], fallback[1], fallback[2]};
}

/// What render_scene draws: the image and, per pixel, which shape covers its centre (0: none,
/// k + 1: the k-th drawn), with each shape's class and its pixel count before later shapes covered it.
struct Scene {
  std::vector<float> image;
  std::vector<int32_t> instance;
  std::vector<int64_t> classes;
  std::vector<int64_t> drawn_pixels;
};

/// 1 to max_shapes shapes with radii in [min_radius, max_radius] x S on one shaded background
/// (render_segment_sample's contract); the draws happen in one fixed order, so a sample's bytes
/// depend on (key, options, max_shapes, radii) alone.
Scene render_scene(uint64_t key, const RenderOptions& options, int max_shapes, float min_radius, float max_radius) {
  const int size = options.image_size;
  const float s = static_cast<float>(size);
  const size_t plane = static_cast<size_t>(size) * size;
  cv::RNG rng(key);  // the sample depends on the key alone (PLG-8)
  const ViewStyle style = draw_style(rng);  // its bg and shading; its fg is the colour fallback
  Scene out;
  out.instance.assign(plane, 0);
  out.image.resize(3 * plane);
  const float inv_size = 1.0f / s;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x)
        out.image[c * plane + static_cast<size_t>(y) * size + x] =
            style.bg[c] + style.grad_y * (static_cast<float>(y) * inv_size - 0.5f) +
            style.grad_x * (static_cast<float>(x) * inv_size - 0.5f);
  const int count = 1 + rng.uniform(0, max_shapes);
  cv::Mat coverage(size, size, CV_8U);
  for (int k = 0; k < count; ++k) {
    const int64_t cls = rng.uniform(0, static_cast<int>(kClassCount));
    const float radius = rng.uniform(min_radius * s, max_radius * s);
    const float cx = rng.uniform(radius + 0.5f, s - 1.5f - radius);
    const float cy = rng.uniform(radius + 0.5f, s - 1.5f - radius);
    const float angle = rng.uniform(0.0f, kTwoPi);
    coverage.setTo(0);
    draw_shape(coverage, cls, cx, cy, radius, angle, rng);
    const std::array<float, 3> fg = draw_foreground(style.bg, style.fg, rng);
    out.classes.push_back(cls);
    out.drawn_pixels.push_back(0);
    for (int y = 0; y < size; ++y) {
      const uint8_t* row = coverage.ptr<uint8_t>(y);
      for (int x = 0; x < size; ++x) {
        if (row[x] == 0) continue;
        const size_t i = static_cast<size_t>(y) * size + x;
        const float a = static_cast<float>(row[x]) * (1.0f / 255.0f);
        for (int c = 0; c < 3; ++c) out.image[c * plane + i] += a * (fg[static_cast<size_t>(c)] - out.image[c * plane + i]);
        if (row[x] < kMaskThreshold) continue;
        out.instance[i] = k + 1;
        ++out.drawn_pixels.back();
      }
    }
  }
  uint64_t stream = static_cast<uint64_t>(rng.next()) << 32;
  stream |= rng.next();
  if (options.noise > 0) add_noise(out.image.data(), out.image.size(), options.noise, stream);
  const float inv_std = 1.0f / kPixelStd;
  for (float& v : out.image) v = (v - kPixelMean) * inv_std;
  return out;
}

}  // namespace

uint64_t sample_key(int64_t seed, uint32_t split, uint64_t index) {
  using tp::cpp::splitmix64;
  return splitmix64(splitmix64(splitmix64(static_cast<uint64_t>(seed)) ^ split) ^ index);
}

Sample render_sample(uint64_t key, const RenderOptions& options) {
  const int size = options.image_size;
  const float s = static_cast<float>(size);
  // A local generator: the sample depends on the key alone, never on which thread renders it.
  cv::RNG rng(key);
  Sample out;
  out.label = rng.uniform(0, static_cast<int>(kClassCount));
  const float radius = rng.uniform(kMinRadius * s, kMaxRadius * s);
  // Pixel centres are at integer coordinates 0..S-1; keep the whole shape inside them.
  const float cx = rng.uniform(radius + 0.5f, s - 1.5f - radius);
  const float cy = rng.uniform(radius + 0.5f, s - 1.5f - radius);
  const float angle = rng.uniform(0.0f, kTwoPi);

  cv::Mat coverage = cv::Mat::zeros(size, size, CV_8U);
  draw_shape(coverage, out.label, cx, cy, radius, angle, rng);

  const size_t plane = static_cast<size_t>(size) * size;
  std::vector<float> alpha(plane);
  out.mask.assign(plane, 0.0f);
  int x_min = size, y_min = size, x_max = -1, y_max = -1;
  for (int y = 0; y < size; ++y) {
    const uint8_t* row = coverage.ptr<uint8_t>(y);
    for (int x = 0; x < size; ++x) {
      const size_t i = static_cast<size_t>(y) * size + x;
      alpha[i] = static_cast<float>(row[x]) * (1.0f / 255.0f);
      if (row[x] < kMaskThreshold) continue;
      out.mask[i] = 1.0f;
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  }
  // The box covers the mask's pixels, edges included; never empty, since radius >= 0.22 S >= 3.5 px.
  if (x_max >= 0) {
    out.bbox = {static_cast<float>(x_min) / s, static_cast<float>(y_min) / s,
                static_cast<float>(x_max + 1) / s, static_cast<float>(y_max + 1) / s};
  }

  const ViewStyle first = draw_style(rng);
  const ViewStyle second = draw_style(rng);
  out.image = compose_view(first, alpha, size, options.noise, rng);
  out.image2 = compose_view(second, alpha, size, options.noise, rng);
  return out;
}

SegmentSample render_segment_sample(uint64_t key, const RenderOptions& options, int max_shapes) {
  Scene scene = render_scene(key, options, max_shapes, kMinSegmentRadius, kMaxSegmentRadius);
  SegmentSample out;
  out.image = std::move(scene.image);
  out.mask.resize(scene.instance.size());
  for (size_t i = 0; i < scene.instance.size(); ++i)
    out.mask[i] = scene.instance[i] == 0 ? 0 : 1 + scene.classes[static_cast<size_t>(scene.instance[i] - 1)];
  return out;
}

DetectSample render_detect_sample(uint64_t key, const RenderOptions& options, int max_shapes) {
  Scene scene = render_scene(key, options, max_shapes, kMinDetectRadius, kMaxDetectRadius);
  const int size = options.image_size;
  const size_t shapes = scene.classes.size();
  // Each shape's visible pixels: their count and bounding box.
  std::vector<int64_t> visible(shapes, 0);
  std::vector<std::array<int, 4>> extent(shapes, {size, size, -1, -1});
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const int32_t k = scene.instance[static_cast<size_t>(y) * size + x];
      if (k == 0) continue;
      auto& [x0, y0, x1, y1] = extent[static_cast<size_t>(k - 1)];
      ++visible[static_cast<size_t>(k - 1)];
      x0 = std::min(x0, x);
      y0 = std::min(y0, y);
      x1 = std::max(x1, x);
      y1 = std::max(y1, y);
    }
  DetectSample out;
  out.image = std::move(scene.image);
  for (size_t k = 0; k < shapes; ++k) {
    // A shape mostly hidden by later ones is no object to find (its box would frame a sliver).
    if (visible[k] == 0 || static_cast<double>(visible[k]) < kMinVisibleShare * static_cast<double>(scene.drawn_pixels[k]))
      continue;
    const auto [x0, y0, x1, y1] = extent[k];
    for (const int v : {x0, y0, x1 + 1, y1 + 1}) out.boxes.push_back(static_cast<float>(v));
    out.labels.push_back(scene.classes[k]);
  }
  return out;
}

void flip_horizontal(DetectSample& sample, int image_size) {
  mirror_rows(sample.image, image_size);
  const float s = static_cast<float>(image_size);
  for (size_t i = 0; i + 3 < sample.boxes.size(); i += 4) {
    const float x0 = sample.boxes[i], x1 = sample.boxes[i + 2];
    sample.boxes[i] = s - x1;
    sample.boxes[i + 2] = s - x0;
  }
}

void flip_horizontal(SegmentSample& sample, int image_size) {
  mirror_rows(sample.image, image_size);
  mirror_rows(sample.mask, image_size);
}

void flip_horizontal(Sample& sample, int image_size) {
  mirror_rows(sample.image, image_size);
  mirror_rows(sample.image2, image_size);
  mirror_rows(sample.mask, image_size);
  const auto [x0, y0, x1, y1] = sample.bbox;
  sample.bbox = {1.0f - x1, y0, 1.0f - x0, y1};
}

}  // namespace tp::shapes
