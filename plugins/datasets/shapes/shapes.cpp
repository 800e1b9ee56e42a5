// The `shapes` plugin: component org.torchhost.shapes, a Tier S dataset of procedurally drawn
// circles, squares and triangles (see README.md). This file holds the schema, the
// descriptor and the dataset class that tp/cpp/dataset_adapter.h turns into the "tp.dataset/1"
// table; shapes_render.cpp draws the pixels.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>

#include "shapes_render.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/cpp/random.h"
#include "tp/tp.h"

namespace {

namespace shapes = tp::shapes;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "size", TP_CFG_INT, "6000", "number of samples in the train split"},
    {sizeof(tp_config_key_t), "val_size", TP_CFG_INT, "1000", "number of samples in the val split"},
    {sizeof(tp_config_key_t), "test_size", TP_CFG_INT, "1000",
     "number of samples in the test split (`host eval/predict --split test`): images neither split holds"},
    {sizeof(tp_config_key_t), "image_size", TP_CFG_INT, "32",
     "side S of the square images, in pixels (16..1024)"},
    {sizeof(tp_config_key_t), "seed", TP_CFG_INT, "0",
     "content seed: which images the dataset holds; independent of the run seed"},
    {sizeof(tp_config_key_t), "noise", TP_CFG_FLOAT, "0.05",
     "std of additive, approximately Gaussian pixel noise in [0, 1] intensity units (0..1)"},
    {sizeof(tp_config_key_t), "augment", TP_CFG_BOOL, "true",
     "random horizontal flip of train samples, drawn from the host's per-sample seed"},
    {sizeof(tp_config_key_t), "task", TP_CFG_STRING, "\"classify\"",
     "\"classify\": one shape, fields image/label/bbox/mask/image2; \"segment\": fields image and mask "
     "(int64 [S, S], 0 = background, 1 + class); \"detect\": fields image, boxes (float [N, 4] x1, y1, x2, y2 "
     "in pixels, ragged), labels (int64 [N], ragged) and image_id"},
    {sizeof(tp_config_key_t), "max_shapes", TP_CFG_INT, "3",
     "tasks \"segment\" and \"detect\": each image holds 1 to max_shapes shapes (1..8), later ones drawn over "
     "earlier ones"},
};

// get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.shapes", "1.0.0", "procedural circles/squares/triangles: image, label, bbox, mask, image2 (or image, class mask)", kKeys);

/* Instance */

/// Pins OpenCV to one thread, once per process. Drawing is serial today; this keeps any OpenCV
/// call that could fan out (fill, resize) from spawning threads inside a host worker, since the
/// host already runs one loader worker per core. Once per process, not per thread:
/// cv::setNumThreads is process-wide and rebuilds OpenCV's thread pool, so several loader
/// workers calling it at once while another draws crashed (SIGSEGV in get_sample, 6 workers on a
/// 16-core machine); a function-local static runs it exactly once, before any worker draws.
void pin_opencv_threads() {
  static const bool pinned = [] {
    cv::setNumThreads(1);
    return true;
  }();
  (void)pinned;
}

/// One split of the dataset. Immutable after construction, so get_sample needs no locking;
/// handed-out fields own their buffers (make_field), so nothing outlives it (PLG-13).
class ShapesDataset {
 public:
  /// Serves "test" too (ABI 1.5): its own content keys, so no image repeats between splits.
  static constexpr bool kHasTestSplit = true;

  explicit ShapesDataset(const tp::cpp::DatasetArgs& args)
      : split_(args.train() ? shapes::kSplitTrain : args.test() ? shapes::kSplitTest : shapes::kSplitVal) {
    const tp::cpp::ConfigReader& cfg = args.config;
    const char* size_key = args.train() ? "size" : args.test() ? "test_size" : "val_size";
    options_.noise = static_cast<float>(cfg.get_float_in("noise", 0.0, 1.0));
    count_ = static_cast<uint64_t>(cfg.get_int_in(size_key, 1, int64_t{1} << 40));
    seed_ = cfg.get_int("seed");
    augment_ = args.train() && cfg.get_bool("augment");
    options_.image_size = static_cast<int>(cfg.get_int_in("image_size", 16, 1024));
    const std::string task = cfg.get_string("task");
    if (task != "classify" && task != "segment" && task != "detect")
      throw tp::cpp::Failure(TP_ERR_CONFIG,
                             "shapes: task must be \"classify\", \"segment\" or \"detect\", got \"" + task + "\"");
    segment_ = task == "segment";
    detect_ = task == "detect";
    max_shapes_ = static_cast<int>(cfg.get_int_in("max_shapes", 1, 8));
  }

  uint64_t size() const { return count_; }

  /// Task "detect": a sample's boxes and labels vary in number, so they batch ragged (ABI 1.6).
  std::vector<tp_field_batching_t> field_batching() const {
    if (!detect_) return {};
    return {tp::cpp::ragged_field("boxes"), tp::cpp::ragged_field("labels")};
  }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    // The train-split augmentation mirrors a sample by the host's per-sample seed (PLG-8).
    const bool flip = augment_ && (tp::cpp::splitmix64(ctx.seed("augment")) & 1u) != 0;
    pin_opencv_threads();
    const int s = options_.image_size;
    if (detect_) {
      shapes::DetectSample sample =
          shapes::render_detect_sample(shapes::sample_key(seed_, split_, index), options_, max_shapes_);
      if (flip) shapes::flip_horizontal(sample, s);
      const int64_t objects = static_cast<int64_t>(sample.labels.size());
      out.add("image", std::move(sample.image), {3, s, s});
      out.add("boxes", std::move(sample.boxes), {objects, 4});
      out.add("labels", std::move(sample.labels), {objects});
      // The sample's index: COCO mAP breaks score ties by it, so that ranks agree with one process.
      out.add("image_id", std::vector<int64_t>{static_cast<int64_t>(index)}, {});
      return;
    }
    if (segment_) {
      shapes::SegmentSample sample =
          shapes::render_segment_sample(shapes::sample_key(seed_, split_, index), options_, max_shapes_);
      if (flip) shapes::flip_horizontal(sample, s);
      out.add("image", std::move(sample.image), {3, s, s});
      out.add("mask", std::move(sample.mask), {s, s});
      return;
    }
    shapes::Sample sample = shapes::render_sample(shapes::sample_key(seed_, split_, index), options_);
    if (flip) shapes::flip_horizontal(sample, s);
    out.add("image", std::move(sample.image), {3, s, s});
    out.add("label", std::vector<int64_t>{sample.label}, {});
    out.add("bbox", std::vector<float>(sample.bbox.begin(), sample.bbox.end()), {4});
    out.add("mask", std::move(sample.mask), {1, s, s});
    out.add("image2", std::move(sample.image2), {3, s, s});
  }

 private:
  uint32_t split_;  // shapes::SplitId
  uint64_t count_ = 0;
  int64_t seed_ = 0;
  bool augment_ = false;  // only ever true for the train split
  bool segment_ = false;  // task "segment": image and class mask
  bool detect_ = false;   // task "detect": image, ragged boxes and labels, image_id
  int max_shapes_ = 3;
  shapes::RenderOptions options_;
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("shapes", ShapesDataset, kDescriptor)
