// Procedural rendering of one `shapes` sample: a circle, square or triangle drawn with OpenCV,
// as two differently coloured views of the same geometry plus its mask, box and label.
// Everything here is a pure function of its arguments (no global state), so any worker thread
// can render any index and get the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tp::shapes {

/// Class ids, in label order.
enum ShapeClass : int64_t { kCircle = 0, kSquare = 1, kTriangle = 2 };
/// Number of classes; labels are in [0, kClassCount).
inline constexpr int64_t kClassCount = 3;

/// Fixed normalisation of the image fields: out = (value - kPixelMean) / kPixelStd. The values
/// are the measured mean and std of un-normalised pixels over the train split (seed 0).
inline constexpr float kPixelMean = 0.4f;
inline constexpr float kPixelStd = 0.3f;

/// Split ids that enter the content key, so "train", "val" and "test" draw different images.
enum SplitId : uint32_t { kSplitTrain = 0, kSplitVal = 1, kSplitTest = 2 };

/// How samples are rendered; fixed for a dataset instance.
struct RenderOptions {
  int image_size = 32; ///< S: images are S x S; at least 16 (shapes span >= ~0.4 S)
  float noise = 0.05f; ///< std of additive Gaussian noise, in un-normalised [0, 1] units
};

/// One rendered sample; the vectors are moved into DLPack fields without copying.
struct Sample {
  std::vector<float> image;  ///< [3, S, S] CHW, normalised with kPixelMean / kPixelStd
  std::vector<float> image2; ///< [3, S, S] second view: same geometry, other colours and noise
  std::vector<float> mask;   ///< [1, S, S] 1 inside the shape, 0 outside
  std::array<float, 4> bbox{}; ///< (x0, y0, x1, y1) of the mask's pixels, normalised to [0, 1]
  int64_t label = 0;         ///< ShapeClass
};

/// The 64-bit content key of sample `index` of `split` under content seed `seed`. Pure; keys
/// of different (seed, split, index) triples are distinct with overwhelming probability.
uint64_t sample_key(int64_t seed, uint32_t split, uint64_t index);

/// Renders the sample whose content key is `key`. A pure function of (key, options); [any]:
/// safe to call from several threads at once. Cost for S = 32: a few tens of microseconds.
/// Example:
///   Sample s = render_sample(sample_key(/*seed=*/0, kSplitTrain, /*index=*/7), RenderOptions{});
Sample render_sample(uint64_t key, const RenderOptions& options);

/// One rendered segmentation sample (`task = "segment"`).
struct SegmentSample {
  std::vector<float> image;   ///< [3, S, S] CHW, normalised with kPixelMean / kPixelStd
  std::vector<int64_t> mask;  ///< [S, S] per-pixel class: 0 background, 1 + ShapeClass inside a shape
};

/// Renders 1 to `max_shapes` shapes (count, classes, sizes, positions, colours all drawn from
/// `key`) on one shaded background, in order: a later shape covers earlier ones, in the image
/// (alpha-blended, anti-aliased edges) and in the mask (pixels whose centre it covers). Each
/// shape is brighter than the background by at least the classification views' luma margin.
/// A pure function of (key, options, max_shapes); [any] thread. Cost for S = 32, 3 shapes: about
/// that of one classification view plus 2-4 us per shape.
SegmentSample render_segment_sample(uint64_t key, const RenderOptions& options, int max_shapes);

/// One rendered detection sample (`task = "detect"`).
struct DetectSample {
  std::vector<float> image;    ///< [3, S, S] CHW, normalised with kPixelMean / kPixelStd
  std::vector<float> boxes;    ///< [N, 4] x0, y0, x1, y1 in pixels (x1, y1 exclusive) of each shape's visible pixels
  std::vector<int64_t> labels; ///< [N] ShapeClass
};

/// Renders 1 to `max_shapes` shapes like render_segment_sample but smaller (radius 0.1 to 0.22 S)
/// and returns their boxes: each shape's visible pixels (those whose centre it covers and no
/// later shape does), framed; a shape with less than 30% of its pixels visible is left out. So
/// boxes overlap when shapes do, and an image may hold several of a class. Pure; [any] thread.
DetectSample render_detect_sample(uint64_t key, const RenderOptions& options, int max_shapes);

/// Mirrors the image and the boxes left to right (the train-split augmentation of task "detect").
void flip_horizontal(DetectSample& sample, int image_size);

/// Mirrors image and mask left to right (the train-split augmentation of task "segment").
void flip_horizontal(SegmentSample& sample, int image_size);

/// Mirrors every field of `sample` left to right (images, mask and bbox alike), the train-split
/// augmentation. Applying it twice restores the sample exactly.
void flip_horizontal(Sample& sample, int image_size);

}  // namespace tp::shapes
