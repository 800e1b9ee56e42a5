// The `coco_detection` plugin: component org.torchhost.coco_detection, a Tier S dataset of
// COCO-format object detection (an image directory and an instances JSON per split). This file is
// its schema, config reading and dataset class (tp/cpp/dataset_adapter.h makes the C ABI shell);
// coco_annotations.cpp reads the JSON, detection_transform.cpp holds the size, flip and box
// geometry. Decoding, resizing and normalising the image reuse the image datasets' shared pixel_io (plugins/datasets/common).
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "coco_annotations.h"
#include "detection_transform.h"
#include "opencv_threads.h"
#include "pixel_io.h"
#include "rgb_key.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;
namespace coco = tp::coco_detection;

/* Schema */

const tp_config_key_t kKeys[] = {
    // Required, as image_folder's and segmentation_folder's `root`: `host plugins check` then
    // reports the component as not created rather than failing it on an empty default, and a
    // [data.val] or [data.test] table names its own files with val_* / test_* besides these.
    {sizeof(tp_config_key_t), "images", TP_CFG_PATH, nullptr,
     "train split: the directory holding the images the JSON's file_name entries name (COCO: train2017)"},
    {sizeof(tp_config_key_t), "annotations", TP_CFG_PATH, nullptr,
     "train split: the instances JSON (COCO: annotations/instances_train2017.json)"},
    {sizeof(tp_config_key_t), "val_images", TP_CFG_PATH, "\"\"", "val split: image directory (COCO: val2017)"},
    {sizeof(tp_config_key_t), "val_annotations", TP_CFG_PATH, "\"\"",
     "val split: instances JSON (COCO: annotations/instances_val2017.json)"},
    {sizeof(tp_config_key_t), "test_images", TP_CFG_PATH, "\"\"",
     "test split (host eval/predict --split test): image directory"},
    {sizeof(tp_config_key_t), "test_annotations", TP_CFG_PATH, "\"\"", "test split: instances JSON"},
    {sizeof(tp_config_key_t), "min_size", TP_CFG_INT_ARRAY, "[800]",
     "shorter side; train draws one per sample (torchvision's multi-scale choice), val/test use the last"},
    {sizeof(tp_config_key_t), "max_size", TP_CFG_INT, "1333",
     "cap on the longer side (scale = min(min_size / shorter, max_size / longer)); ScaleJitter's target size"},
    {sizeof(tp_config_key_t), "scale_jitter", TP_CFG_FLOAT_ARRAY, "[0.0, 0.0]",
     "train: [lo, hi] = torchvision v2 ScaleJitter(target_size=(max_size, max_size), scale_range=(lo, hi)) "
     "instead of min_size; [0, 0] = off"},
    {sizeof(tp_config_key_t), "hflip", TP_CFG_FLOAT, "0.5", "train: probability of mirroring image and boxes"},
    {sizeof(tp_config_key_t), "mean", TP_CFG_FLOAT_ARRAY, "[0.485, 0.456, 0.406]",
     "RGB mean subtracted after scaling to [0, 1]"},
    {sizeof(tp_config_key_t), "std", TP_CFG_FLOAT_ARRAY, "[0.229, 0.224, 0.225]", "RGB std divided by after the mean"},
    {sizeof(tp_config_key_t), "contiguous_labels", TP_CFG_BOOL, "false",
     "false: label = COCO category_id (num_classes = 91 for COCO); true: 0..K-1 in ascending category id"},
    {sizeof(tp_config_key_t), "allow_outside_root", TP_CFG_BOOL, "false",
     "true: a file_name may be absolute or climb out of the image directory with '..' (false refuses the file at "
     "start-up, naming the image)"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "0",
     "the model's class count: > 0 checks at start-up that every annotation's label is below it; 0: unchecked "
     "here (fcos_loss checks the labels it trains on)"},
    {sizeof(tp_config_key_t), "drop_negative_boxes", TP_CFG_BOOL, "false",
     "drop (and count in a warning) an annotation whose bbox has a negative width or height (torchvision drops those too); "
     "false: such a file is refused, naming the annotation"},
    {sizeof(tp_config_key_t), "skip_empty", TP_CFG_BOOL, "true",
     "train: drop images without a non-crowd box wider and taller than 1 pixel (val/test keep every image)"},
    {sizeof(tp_config_key_t), "max_image_pixels", TP_CFG_INT, tp::datasets::kDefaultMaxImagePixelsText,
     tp::datasets::kMaxImagePixelsHelp},
    // host predict --images and the inference library's run_files hand new images here (docs/predict.md).
    {sizeof(tp_config_key_t), "files", TP_CFG_STRING_ARRAY, "[]",
     "val/test only: these image files, in this order and without annotations, instead of the split's image "
     "directory and JSON (host predict --images): sized as val (the last min_size, max_size), image_id = "
     "position + 1, no boxes"},
};

// get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.coco_detection", "1.0.0",
    "COCO-format object detection (image directory + instances JSON), resized and flipped as torchvision's "
    "detection recipes: image, boxes, labels, image_id, orig_size; val/test also gt_boxes, gt_labels, "
    "gt_iscrowd, gt_areas in original pixels",
    kKeys);

/* Config */

[[noreturn]] void config_error(const std::string& what) { throw Failure(TP_ERR_CONFIG, "coco_detection: " + what); }

coco::DetectionOptions read_transform(const tp::cpp::ConfigReader& cfg, bool train) {
  coco::DetectionOptions o;
  o.max_size = static_cast<int>(cfg.get_int_in("max_size", 1, 65535));
  const std::vector<int64_t> sizes = cfg.get_int_array("min_size");
  if (sizes.empty()) config_error("min_size is empty; give at least one shorter side, e.g. [800]");
  o.min_size.clear();
  for (int64_t s : sizes) {
    if (s < 1 || s > 65535) config_error("min_size values must be in [1, 65535], got " + std::to_string(s));
    o.min_size.push_back(static_cast<int>(s));
  }
  const std::vector<double> jitter = cfg.get_float_array("scale_jitter");
  if (jitter.size() != 2 || !(jitter[0] >= 0.0) || !(jitter[0] <= jitter[1]) || jitter[1] > 100.0 ||
      (jitter[1] > 0.0 && !(jitter[0] > 0.0)))
    config_error("scale_jitter must be [0, 0] (off) or [lo, hi] with 0 < lo <= hi <= 100 (torchvision's LSJ: "
                 "[0.1, 2.0] with max_size = 1024)");
  o.scale_jitter = {jitter[0], jitter[1]};
  o.hflip = cfg.get_float_in("hflip", 0.0, 1.0);
  o.random = train;
  return o;
}

/// The image directory and JSON of `split`, checked to be set and to exist.
std::pair<std::string, std::string> split_files(const tp::cpp::ConfigReader& cfg, tp::cpp::Split split,
                                                const char** json_key) {
  const char* dir_key = split == tp::cpp::Split::kTrain ? "images" : split == tp::cpp::Split::kVal ? "val_images" : "test_images";
  *json_key = split == tp::cpp::Split::kTrain ? "annotations"
              : split == tp::cpp::Split::kVal ? "val_annotations"
                                              : "test_annotations";
  const std::string dir = cfg.get_string(dir_key), json = cfg.get_string(*json_key);
  if (dir.empty() || json.empty()) {
    const std::string what = std::string("`") + dir_key + "` and `" + *json_key + "`";
    if (split == tp::cpp::Split::kVal)
      config_error("the val split needs " + what + " (COCO: val2017 and annotations/instances_val2017.json), or set "
                   "eval.strategy = \"no\"");
    config_error(std::string("the ") + (split == tp::cpp::Split::kTrain ? "train" : "test") + " split needs " + what +
                 " (the image directory and its instances JSON)");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw Failure(TP_ERR_IO, "coco_detection: the image directory '" + dir + "' (key `" + dir_key +
                                 "`) does not exist or is not a directory; set it to the folder holding the images "
                                 "the JSON's file_name entries name (COCO: train2017 or val2017)");
  return {dir, json};
}

/// Why the host could not take `name` as a class name (tp_class_names_t: non-empty, at most 256
/// bytes, no control character; nlohmann's parser already refused ill-formed UTF-8), or "".
std::string class_name_problem(const std::string& name) {
  if (name.empty()) return "has no `name`";
  if (name.size() > 256) return "has a `name` of " + std::to_string(name.size()) + " bytes (at most 256)";
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto byte = static_cast<unsigned char>(name[i]);
    const auto next = i + 1 < name.size() ? static_cast<unsigned char>(name[i + 1]) : 0U;
    // C0 controls and DEL, or C1 controls (U+0080..U+009F: 0xC2 0x80..0x9F in UTF-8).
    const unsigned code = byte < 0x20 || byte == 0x7F ? byte : byte == 0xC2 && next >= 0x80 && next <= 0x9F ? next : 0U;
    if (code != 0U || byte == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "%04X", code);
      return std::string("holds the control character U+") + hex + " in its `name`";
    }
  }
  return "";
}

/* Instance */

/// One split. Immutable after construction, so get_sample needs no locking; handed-out tensors
/// own their buffers, so nothing outlives it (PLG-13).
class CocoDetectionDataset {
 public:
  /// The test split reads like val (no augmentation, ground truth fields), from test_*.
  static constexpr bool kHasTestSplit = true;

  explicit CocoDetectionDataset(const tp::cpp::DatasetArgs& args)
      : transform_(read_transform(args.config, args.train())), train_(args.train()) {
    format_.mean = tp::datasets::read_rgb_key(args.config, "coco_detection", "mean", false);
    format_.std = tp::datasets::read_rgb_key(args.config, "coco_detection", "std", true);
    max_image_pixels_ = args.config.get_int_in("max_image_pixels", 0, tp::datasets::kMaxImagePixelsBound);
    if (std::vector<std::string> files = args.config.get_string_array("files"); !files.empty()) {
      if (args.train())
        config_error("`files` (images without annotations) serves the val and test splits only (host predict "
                     "--images); the train split reads `images` and `annotations`");
      use_files(std::move(files), args);
      return;
    }
    const char* json_key = nullptr;
    auto [dir, json] = split_files(args.config, args.split, &json_key);
    image_dir_ = std::filesystem::path(std::move(dir));
    image_key_ = args.train() ? "images" : args.split == tp::cpp::Split::kVal ? "val_images" : "test_images";
    coco::CocoReadOptions read;
    read.contiguous_labels = args.config.get_bool("contiguous_labels");
    read.skip_empty = args.train() && args.config.get_bool("skip_empty");
    read.drop_negative_boxes = args.config.get_bool("drop_negative_boxes");
    read.num_classes = args.config.get_int_in("num_classes", 0, int64_t{1} << 31);
    split_ = coco::read_coco(json, json_key, read);
    for (const std::string& warning : split_.warnings) args.log(TP_LOG_WARNING, warning);
    // A file_name is the image directory's: an absolute one, or one climbing out with '..', reads
    // whatever file it names (issue 41, item 11), unless the config says the files lie elsewhere.
    if (!args.config.get_bool("allow_outside_root"))
      for (const coco::CocoImage& image : split_.images)
        if (const std::string why = tp::datasets::escapes_root(image.file_name); !why.empty())
          throw Failure(TP_ERR_CONFIG, "coco_detection: '" + json + "' (key `" + json_key + "`): the image id " +
                                           std::to_string(image.id) + " has the file_name '" + image.file_name +
                                           "', which " + why + " of `" + image_key_ + "` (" + image_dir_.string() +
                                           "); name files inside it, or set allow_outside_root = true if the "
                                           "annotations are meant to reach files elsewhere");
    args.log(TP_LOG_INFO, std::string("coco_detection (") + args.split_name + "): " +
                              std::to_string(split_.images.size()) + " images, " +
                              std::to_string(split_.objects.size()) + " annotations, " +
                              std::to_string(split_.category_ids.size()) + " categories from '" + json + "'");
    if (read.contiguous_labels) name_labels(args, json, json_key);
    // Evaluating on the training annotations measures memory, not generalisation: said, not
    // refused, since an overfit check does it on purpose (dense trial F14).
    std::error_code same_error;
    const std::string train_json = args.config.get_string("annotations");
    if (!args.train() && !train_json.empty() && std::filesystem::equivalent(json, train_json, same_error))
      args.log(TP_LOG_WARNING, std::string("coco_detection (") + args.split_name + "): `" + json_key + "` is the train "
                                   "split's annotations file ('" + json + "'): its loss and mAP score the images the "
                                   "model trains on. Point it at a held-out file (COCO: instances_val2017.json) "
                                   "unless that is the point (an overfit check)");
    // An image list without annotations (COCO's test-dev) is what host predict reads; evaluated, it
    // gave a trial "test/loss 1.01212" (every image scored as background) and every mAP -1, exit 0.
    if (!args.train() && split_.objects.empty() && !split_.images.empty())
      args.log(TP_LOG_WARNING,
               std::string("coco_detection (") + args.split_name + "): '" + json + "' (key `" + json_key + "`) has " +
                   std::to_string(split_.images.size()) +
                   " images and no annotations, so a loss or mAP computed on this split measures nothing (the loss "
                   "scores every image as background, every mAP is -1). Predicting on it is fine (host predict --split " +
                   args.split_name + "); to evaluate, point `" + json_key + "` at an instances file with `annotations`");
  }

  uint64_t size() const { return split_.images.size(); }

  /// With contiguous_labels, label i's name is the i-th category's by id (ABI 1.12): host export
  /// writes them as torchhost.classes. None with category ids as labels (the host takes names for
  /// every id 0..count - 1, and COCO's ids leave gaps) or with `files` (no JSON is read).
  tp::cpp::ClassNames class_names() const { return classes_; }

  /// Each image's file, as read (ABI 1.13): host predict's `path` column for a split.
  std::vector<std::string> sample_keys() const {
    std::vector<std::string> keys;
    keys.reserve(split_.images.size());
    for (const coco::CocoImage& image : split_.images) keys.push_back(file_of(image));
    return keys;
  }

  /// Sizes differ per image (the aspect ratio is kept), so `image` is padded to the batch's
  /// largest with 0, the mean colour after normalisation (the loader adds image_lengths); a
  /// sample's objects vary in number, so the per-object fields are ragged (ABI 1.6).
  std::vector<tp_field_batching_t> field_batching() const {
    std::vector<tp_field_batching_t> fields{tp::cpp::pad_field("image", 0.0), tp::cpp::ragged_field("boxes"),
                                            tp::cpp::ragged_field("labels")};
    if (!train_)
      for (const char* name : {"gt_boxes", "gt_labels", "gt_iscrowd", "gt_areas"})
        fields.push_back(tp::cpp::ragged_field(name));
    return fields;
  }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    const coco::CocoImage& image = split_.images[index];
    const cv::Mat bgr = decode(image);
    const coco::Size2 source{bgr.rows, bgr.cols};
    // The per-sample seed drives the train augmentation (PLG-8); val has none to draw.
    const coco::DetectionPlan plan = coco::plan_detection(source, transform_, train_ ? ctx.seed("train augmentation") : 0);

    std::vector<float> boxes;
    std::vector<int64_t> labels;
    coco::training_boxes(split_, image, source, boxes, labels);
    coco::transform_boxes(boxes, plan);

    const cv::Mat sized = tp::datasets::resize_bgr(bgr, plan.sized.h, plan.sized.w);
    std::vector<float> pixels(static_cast<std::size_t>(3) * plan.sized.h * plan.sized.w);
    tp::datasets::write_pixels(sized, plan.flip, format_, nullptr, pixels.data());

    const auto objects = static_cast<int64_t>(labels.size());
    out.add("image", std::move(pixels), {3, plan.sized.h, plan.sized.w});
    out.add("boxes", std::move(boxes), {objects, 4});
    out.add("labels", std::move(labels), {objects});
    out.add("image_id", std::vector<int64_t>{image.id}, {});
    out.add("orig_size", std::vector<int64_t>{source.h, source.w}, {2});
    if (!train_) add_ground_truth(image, out);
  }

 private:
  /// `files` as the split: each a file of unknown size (no check against a declared one) and no
  /// objects, numbered 1.. in the order given; no JSON is read.
  void use_files(std::vector<std::string> files, const tp::cpp::DatasetArgs& args) {
    image_key_ = "files";
    for (std::size_t i = 0; i < files.size(); ++i) {
      coco::CocoImage image;
      image.id = static_cast<int64_t>(i + 1);
      image.file_name = std::move(files[i]);
      split_.images.push_back(std::move(image));
    }
    args.log(TP_LOG_INFO, std::string("coco_detection (") + args.split_name + "): " +
                              std::to_string(split_.images.size()) + " image files without annotations (`files`)");
  }

  /// Contiguous labels: logs which category each label is (a COCO results file needs the ids, and
  /// predictions and exports carry only labels: a trial's finding) and keeps the categories'
  /// names as the labels' class names, or none, with a warning, when one is unusable.
  void name_labels(const tp::cpp::DatasetArgs& args, const std::string& json, const char* json_key) {
    const std::vector<int64_t>& ids = split_.category_ids;
    if (ids.empty()) return;
    std::string listed;
    std::string problem;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::string& name = split_.category_names[k];
      listed += (k == 0 ? "" : ", ") + std::to_string(ids[k]);
      if (!name.empty()) listed += " (" + name + ")";
      if (const std::string why = class_name_problem(name); problem.empty() && !why.empty())
        problem = "the category id " + std::to_string(ids[k]) + " " + why;
    }
    args.log(TP_LOG_INFO, std::string("coco_detection (") + args.split_name + "): labels 0.." +
                              std::to_string(ids.size() - 1) + " are the category ids " + listed + " of '" + json + "'");
    if (!problem.empty()) {
      args.log(TP_LOG_WARNING, std::string("coco_detection (") + args.split_name + "): '" + json + "' (key `" +
                                   json_key + "`): " + problem + ", so the dataset lends no class names: host export "
                                   "writes no torchhost.classes and the labels stay numbers. Give every category a "
                                   "name (1 to 256 bytes, no control characters)");
      return;
    }
    classes_ = {"labels", split_.category_names};
  }

  /// The file `image` is read from: its file_name under the image directory (`files`: as given).
  std::string file_of(const coco::CocoImage& image) const { return (image_dir_ / image.file_name).string(); }

  /// The decoded file; a failure names the image id, the file and the key.
  cv::Mat decode(const coco::CocoImage& image) const {
    const std::string path = file_of(image);
    cv::Mat bgr;
    try {
      const std::vector<unsigned char> bytes =
          tp::datasets::read_image_file(path, "coco_detection", max_image_pixels_, tp::datasets::kMaxImageFileBytes);
      bgr = tp::datasets::decode_bgr(bytes, cv::IMREAD_COLOR, path, "coco_detection");
    } catch (const Failure& e) {
      throw Failure(e.code(), std::string(e.what()) + " (image id " + std::to_string(image.id) + ", file_name '" +
                                  image.file_name + "' under `" + image_key_ + "`)");
    }
    // Boxes are in the pixels of the size the JSON declares; another size (a resized copy, an
    // EXIF-rotated export) would silently misplace every box.
    if ((image.width > 0 && image.width != bgr.cols) || (image.height > 0 && image.height != bgr.rows))
      throw Failure(TP_ERR_IO, "coco_detection: '" + path + "' (image id " + std::to_string(image.id) + ") is " +
                                   std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows) + " but the JSON says " +
                                   std::to_string(image.width) + "x" + std::to_string(image.height) +
                                   " (width x height), so its boxes would not fit it; use the original file" +
                                   tp::datasets::exif_swap_hint(bgr.cols, bgr.rows, image.width, image.height));
    return bgr;
  }

  /// Every annotation of the image (crowds included) in the file's pixels, for COCO evaluation:
  /// the bbox as x, y, x + w, y + h (float32, unclamped, as pycocotools reads it), label, crowd
  /// flag and the annotation's area.
  void add_ground_truth(const coco::CocoImage& image, tp::cpp::Sample& out) const {
    const int64_t n = image.object_count;
    std::vector<float> boxes, areas;
    std::vector<int64_t> labels, crowd;
    boxes.reserve(static_cast<std::size_t>(4 * n));
    for (uint32_t k = 0; k < image.object_count; ++k) {
      const coco::CocoObject& o = split_.objects[image.first_object + k];
      boxes.insert(boxes.end(), {o.x, o.y, o.x + o.w, o.y + o.h});
      labels.push_back(o.label);
      crowd.push_back(o.crowd ? 1 : 0);
      areas.push_back(o.area);
    }
    out.add("gt_boxes", std::move(boxes), {n, 4});
    out.add("gt_labels", std::move(labels), {n});
    out.add("gt_iscrowd", std::move(crowd), {n});
    out.add("gt_areas", std::move(areas), {n});
  }

  coco::DetectionOptions transform_;
  tp::datasets::PixelFormat format_;
  bool train_ = false;
  std::filesystem::path image_dir_;
  const char* image_key_ = "images";
  int64_t max_image_pixels_ = tp::datasets::kDefaultMaxImagePixels;
  coco::CocoSplit split_;
  tp::cpp::ClassNames classes_;  // empty: none lent (class_names)
  tp::datasets::OpenCvThreadsPin pin_;  // OpenCV single-threaded while this instance lives
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("coco_detection", CocoDetectionDataset, kDescriptor)
