// The `segmentation_folder` plugin: component org.torchhost.segmentation_folder, a Tier S dataset
// of image / class-mask pairs (root/images/<stem>.jpg with root/masks/<stem>.png) for semantic
// segmentation. This file is its schema, config reading and dataset class (tp/cpp/dataset_adapter.h
// makes the C ABI shell); pair_listing.cpp finds the pairs, mask_png.cpp reads the masks,
// joint_transform.cpp transforms both together. Decoding and normalising the image reuse
// image datasets' shared pixel_io (plugins/datasets/common).
#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "image_extensions.h"
#include "joint_transform.h"
#include "mask_png.h"
#include "opencv_threads.h"
#include "pair_listing.h"
#include "pixel_io.h"
#include "rgb_key.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/cpp/random.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;
namespace seg = tp::segmentation_folder;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "root", TP_CFG_PATH, nullptr,
     "train split: directory holding image_dir and mask_dir (images/<stem>.jpg, masks/<stem>.png)"},
    {sizeof(tp_config_key_t), "image_dir", TP_CFG_STRING, "\"images\"", "sub-directory of each root holding the images"},
    {sizeof(tp_config_key_t), "mask_dir", TP_CFG_STRING, "\"masks\"", "sub-directory of each root holding the masks"},
    {sizeof(tp_config_key_t), "mask_suffix", TP_CFG_STRING, "\".png\"",
     "a mask's file name is <stem><mask_suffix> (e.g. \"_mask.png\")"},
    {sizeof(tp_config_key_t), "extensions", TP_CFG_STRING_ARRAY, tp::datasets::kImageFolderExtensionsToml,
     "image file endings (any case); the default is image_folder's, torchvision's IMG_EXTENSIONS"},
    {sizeof(tp_config_key_t), "list", TP_CFG_PATH, "\"\"",
     "optional file of stems, one per line, selecting the train pairs; \"\" = every image under root/image_dir"},
    {sizeof(tp_config_key_t), "val_root", TP_CFG_PATH, "\"\"", "val split directory; \"\" = root (with val_list)"},
    {sizeof(tp_config_key_t), "val_list", TP_CFG_PATH, "\"\"", "file of val stems"},
    {sizeof(tp_config_key_t), "val_split", TP_CFG_FLOAT, "0.0",
     "without val_root/val_list: fraction of the train pairs held out as val (seeded by split_seed)"},
    {sizeof(tp_config_key_t), "split_seed", TP_CFG_INT, "0", "seed of the val_split choice"},
    {sizeof(tp_config_key_t), "test_root", TP_CFG_PATH, "\"\"",
     "test split (host eval/predict --split test) directory; \"\" = root (with test_list)"},
    {sizeof(tp_config_key_t), "test_list", TP_CFG_PATH, "\"\"", "file of test stems"},
    {sizeof(tp_config_key_t), "allow_outside_root", TP_CFG_BOOL, "false",
     "true: a listed stem may be absolute or climb out of image_dir and mask_dir with '..' (false refuses the list "
     "at start-up, naming the stem)"},
    {sizeof(tp_config_key_t), "resize", TP_CFG_INT_ARRAY, "[]",
     "[s]: shorter side to s; [h, w]: exact size; []: keep. Val/test; train only without a random size step"},
    {sizeof(tp_config_key_t), "random_resize", TP_CFG_INT_ARRAY, "[]",
     "train only: [min, max], shorter side uniform in [min, max) (torchvision v2 RandomResize); []: off"},
    {sizeof(tp_config_key_t), "random_resized_crop", TP_CFG_INT_ARRAY, "[]",
     "train only: [s] or [h, w] output of torchvision's RandomResizedCrop on image and mask; []: off"},
    {sizeof(tp_config_key_t), "scale", TP_CFG_FLOAT_ARRAY, "[0.08, 1.0]", "random_resized_crop area range"},
    {sizeof(tp_config_key_t), "ratio", TP_CFG_FLOAT_ARRAY, "[0.75, 1.3333333333333333]",
     "random_resized_crop aspect (w/h) range"},
    {sizeof(tp_config_key_t), "crop_size", TP_CFG_INT_ARRAY, "[]",
     "train only: [s] or [h, w]; pad bottom/right to at least this (image 0, mask ignore_index), then a random crop"},
    {sizeof(tp_config_key_t), "hflip", TP_CFG_FLOAT, "0.0", "train only: probability of a joint horizontal flip"},
    {sizeof(tp_config_key_t), "brightness", TP_CFG_FLOAT, "0.0", "train only: image colour jitter, factor in [1-b, 1+b]"},
    {sizeof(tp_config_key_t), "contrast", TP_CFG_FLOAT, "0.0", "train only: image colour jitter, factor in [1-c, 1+c]"},
    {sizeof(tp_config_key_t), "saturation", TP_CFG_FLOAT, "0.0", "train only: image colour jitter, factor in [1-s, 1+s]"},
    {sizeof(tp_config_key_t), "mean", TP_CFG_FLOAT_ARRAY, "[0.0, 0.0, 0.0]", "RGB mean subtracted after scaling to [0, 1]"},
    {sizeof(tp_config_key_t), "std", TP_CFG_FLOAT_ARRAY, "[1.0, 1.0, 1.0]", "RGB std divided by after the mean"},
    {sizeof(tp_config_key_t), "ignore_index", TP_CFG_INT, "255",
     "mask value of padded pixels (0..255); losses and metrics skip it"},
    {sizeof(tp_config_key_t), "num_classes", TP_CFG_INT, "0",
     "when > 0: a mask value outside [0, num_classes) other than ignore_index fails its sample"},
    {sizeof(tp_config_key_t), "class_colors", TP_CFG_INT_ARRAY, "[]",
     "RGB masks: [r, g, b, r, g, b, ...], colour k is class k; []: masks hold class ids (palette or grey PNG)"},
    {sizeof(tp_config_key_t), "mask_map", TP_CFG_INT_ARRAY, "[]",
     "a lookup table: mask value v (after class_colors) becomes mask_map[v], 0..255; values past its end keep "
     "theirs (Cityscapes' labelIds to trainIds); []: off"},
    {sizeof(tp_config_key_t), "reduce_zero_label", TP_CFG_BOOL, "false",
     "mmseg's ADE20K rule: value 0 becomes ignore_index, every other value v becomes v - 1 (excludes mask_map)"},
    {sizeof(tp_config_key_t), "class_names", TP_CFG_STRING_ARRAY, "[]",
     "the classes' names by id (name k is mask value k; as many as num_classes when set): host export writes them "
     "as torchhost.classes, the inference library's class_names(); []: unnamed"},
    {sizeof(tp_config_key_t), "max_image_pixels", TP_CFG_INT, tp::datasets::kDefaultMaxImagePixelsText,
     tp::datasets::kMaxImagePixelsHelp},
    // host predict --images and the inference library's run_files hand new images here (docs/predict.md).
    {sizeof(tp_config_key_t), "files", TP_CFG_STRING_ARRAY, "[]",
     "val/test only: these image files, in this order and without masks, instead of the split's pairs (host "
     "predict --images): transformed as val, `image` alone"},
};

// get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.segmentation_folder", "1.0.0",
    "image / class-mask pairs for semantic segmentation, transformed jointly with OpenCV: image, mask; val/test also "
    "orig_size", kKeys);

/* Config */

[[noreturn]] void config_error(const std::string& what) { throw Failure(TP_ERR_CONFIG, "segmentation_folder: " + what); }

/// mask_map or reduce_zero_label as a 256-entry lookup table (CV_8U, one row); empty when neither.
cv::Mat read_value_map(const tp::cpp::ConfigReader& cfg, int ignore_index) {
  const std::vector<int64_t> map = cfg.get_int_array("mask_map");
  const bool reduce_zero = cfg.get_bool("reduce_zero_label");
  if (reduce_zero && !map.empty())
    config_error("mask_map and reduce_zero_label both remap the mask's values; set one (reduce_zero_label = true is "
                 "mask_map = [ignore_index, 0, 1, 2, ...])");
  if (map.size() > 256)
    config_error("mask_map has " + std::to_string(map.size()) + " entries; mask values are 0..255, so at most 256");
  if (!reduce_zero && map.empty()) return {};
  cv::Mat table(1, 256, CV_8U);
  for (int v = 0; v < 256; ++v) {
    int64_t to = v;
    if (reduce_zero) to = v == 0 ? ignore_index : v - 1;
    else if (static_cast<std::size_t>(v) < map.size()) to = map[static_cast<std::size_t>(v)];
    if (to < 0 || to > 255)
      config_error("mask_map[" + std::to_string(v) + "] is " + std::to_string(to) + "; a mask value is 0..255 "
                   "(ignore_index for pixels that count nowhere)");
    table.at<unsigned char>(0, v) = static_cast<unsigned char>(to);
  }
  return table;
}

/// `[]`, `[s]` or `[h, w]` of `key`; `[s]` is s x s unless `out_short` takes it.
seg::Size2 read_size(const tp::cpp::ConfigReader& cfg, const char* key, int* out_short) {
  const std::vector<int64_t> v = cfg.get_int_array(key);
  for (int64_t x : v)
    if (x < 1 || x > 65535) config_error(std::string(key) + " values must be in [1, 65535], got " + std::to_string(x));
  if (v.empty()) return {};
  if (v.size() == 1) {
    if (out_short != nullptr) {
      *out_short = static_cast<int>(v[0]);
      return {};
    }
    return {static_cast<int>(v[0]), static_cast<int>(v[0])};
  }
  if (v.size() == 2) return {static_cast<int>(v[0]), static_cast<int>(v[1])};
  config_error(std::string(key) + " must be [], [s] or [h, w], got " + std::to_string(v.size()) + " values");
}

std::array<double, 2> read_range(const tp::cpp::ConfigReader& cfg, const char* key) {
  const std::vector<double> v = cfg.get_float_array(key);
  if (v.size() != 2 || !(v[0] > 0.0) || !(v[0] <= v[1])) config_error(std::string(key) + " must be [lo, hi] with 0 < lo <= hi");
  return {v[0], v[1]};
}

seg::JointOptions read_transform(const tp::cpp::ConfigReader& cfg, bool train) {
  seg::JointOptions o;
  o.resize = read_size(cfg, "resize", &o.resize_short);
  const std::vector<int64_t> rr = cfg.get_int_array("random_resize");
  if (!rr.empty()) {
    if (rr.size() != 2 || rr[0] < 1 || rr[0] >= rr[1] || rr[1] > 65536)
      config_error("random_resize must be [] or [min, max] with 1 <= min < max <= 65536 (the shorter side is drawn "
                   "from [min, max))");
    o.random_resize = {static_cast<int>(rr[0]), static_cast<int>(rr[1])};
  }
  o.random_resized_crop = read_size(cfg, "random_resized_crop", nullptr);
  if (o.random_resized_crop.set() && o.random_resize[1] > 0)
    config_error("set either random_resize or random_resized_crop, not both");
  o.scale = read_range(cfg, "scale");
  if (o.scale[1] > 1.0) config_error("scale must lie in (0, 1]");
  o.ratio = read_range(cfg, "ratio");
  o.crop = read_size(cfg, "crop_size", nullptr);
  o.hflip = cfg.get_float_in("hflip", 0.0, 1.0);
  o.brightness = cfg.get_float_in("brightness", 0.0, 1e6);
  o.contrast = cfg.get_float_in("contrast", 0.0, 1e6);
  o.saturation = cfg.get_float_in("saturation", 0.0, 1e6);
  o.format.mean = tp::datasets::read_rgb_key(cfg, "segmentation_folder", "mean", false);
  o.format.std = tp::datasets::read_rgb_key(cfg, "segmentation_folder", "std", true);
  o.ignore_index = static_cast<int>(cfg.get_int_in("ignore_index", 0, 255));
  o.random = train;
  // Train samples stack into a batch, so they need one size; val/test samples are padded by the
  // loader (field_batching) and may keep their own.
  const bool fixed = o.crop.set() || o.random_resized_crop.set() || (o.resize.set() && o.random_resize[1] == 0);
  if (train && !fixed)
    config_error("the train split needs a fixed output size so its samples stack: set `crop_size` (with "
                 "`random_resize`, torchvision's recipe), `random_resized_crop`, or `resize = [h, w]`");
  return o;
}

seg::PairSource source_for(const tp::cpp::ConfigReader& cfg, const std::string& root, const std::string& list) {
  seg::PairSource s;
  s.root = root;
  s.image_dir = cfg.get_string("image_dir");
  s.mask_dir = cfg.get_string("mask_dir");
  s.mask_suffix = cfg.get_string("mask_suffix");
  s.list = list;
  s.extensions = cfg.get_string_array("extensions");
  s.allow_outside_root = cfg.get_bool("allow_outside_root");
  return s;
}

seg::PairListing listing_for(const tp::cpp::ConfigReader& cfg, tp::cpp::Split split) {
  // New images without masks: no folder is listed (masks stays empty).
  if (std::vector<std::string> files = cfg.get_string_array("files"); !files.empty()) {
    if (split == tp::cpp::Split::kTrain)
      config_error("`files` (images without masks) serves the val and test splits only (host predict --images); "
                   "the train split reads image/mask pairs");
    return seg::PairListing{.images = std::move(files), .masks = {}, .loops = {}};
  }
  const std::string root = cfg.get_string("root");
  if (root.empty()) config_error("`root` is empty; set it to the directory holding image_dir and mask_dir");
  if (split == tp::cpp::Split::kTest) {
    // Only test_root/test_list: from the training table `root` alone is the training data.
    const std::string test_root = cfg.get_string("test_root"), test_list = cfg.get_string("test_list");
    if (test_root.empty() && test_list.empty())
      config_error("the test split needs `test_root` or `test_list`; without them it would read the training pairs");
    return seg::list_pairs(source_for(cfg, test_root.empty() ? root : test_root, test_list));
  }
  const std::string val_root = cfg.get_string("val_root"), val_list = cfg.get_string("val_list");
  const double val_split = cfg.get_float_in("val_split", 0.0, 1.0);
  const bool separate_val = !val_root.empty() || !val_list.empty();
  if (separate_val && val_split > 0.0) config_error("set either val_root/val_list or val_split, not both");
  const bool train = split == tp::cpp::Split::kTrain;
  if (val_split > 0.0) {
    const seg::PairListing all = seg::list_pairs(source_for(cfg, root, cfg.get_string("list")));
    const std::vector<bool> held_out = tp::cpp::seeded_holdout(
        all.images.size(), val_split, static_cast<uint64_t>(cfg.get_int("split_seed")), "segmentation_folder", "pairs");
    return seg::select_pairs(all, held_out, !train);
  }
  if (train) return seg::list_pairs(source_for(cfg, root, cfg.get_string("list")));
  if (!separate_val)
    config_error("the val split needs `val_root`, `val_list` or `val_split` > 0 (or set eval.strategy = \"no\")");
  return seg::list_pairs(source_for(cfg, val_root.empty() ? root : val_root, val_list));
}

/* Instance */

/// One split. Immutable after construction, so get_sample needs no locking; handed-out tensors
/// own their buffers, so nothing outlives it (PLG-13).
class SegmentationFolderDataset {
 public:
  /// The test split reads like val (no augmentation), from test_root/test_list.
  static constexpr bool kHasTestSplit = true;

  explicit SegmentationFolderDataset(const tp::cpp::DatasetArgs& args)
      : transform_(read_transform(args.config, args.train())),
        colours_(args.config.get_int_array("class_colors")),
        value_map_(read_value_map(args.config, transform_.ignore_index)),
        names_(args.config.get_string_array("class_names")),
        num_classes_(static_cast<int>(args.config.get_int_in("num_classes", 0, 256))),
        max_image_pixels_(args.config.get_int_in("max_image_pixels", 0, tp::datasets::kMaxImagePixelsBound)),
        train_(args.train()),
        pairs_(listing_for(args.config, args.split)) {
    if (num_classes_ > 0 && !names_.empty() && static_cast<int>(names_.size()) != num_classes_)
      config_error("class_names names " + std::to_string(names_.size()) + " classes but num_classes = " +
                   std::to_string(num_classes_) + ": give one name per class, in mask-value order");
    args.log(TP_LOG_INFO, std::string("segmentation_folder (") + args.split_name + "): " +
                              std::to_string(pairs_.images.size()) +
                              (labelled() ? " image/mask pairs" : " image files without masks (`files`)"));
    if (const std::string warning = ignored_foreground_warning(); !warning.empty())
      args.log(TP_LOG_WARNING, std::string("segmentation_folder (") + args.split_name + "): " + warning);
    for (const std::string& loop : pairs_.loops)
      args.log(TP_LOG_WARNING, std::string("segmentation_folder (") + args.split_name + "): '" + loop +
                                   "' under image_dir links back to a folder it is inside (a link loop): not "
                                   "followed, so each image is listed once; remove the link if it is a mistake");
  }

  uint64_t size() const { return pairs_.images.size(); }

  /// class_names (ABI 1.12) for the mask's values: what an export of the run names its classes.
  tp::cpp::ClassNames class_names() const { return {"mask", names_}; }

  /// Each sample's image file, as read (ABI 1.13): host predict's `path` column for a split.
  std::vector<std::string> sample_keys() const { return pairs_.images; }

  /// Val and test samples keep their resized sizes; the loader pads them to the batch's largest,
  /// the image with 0 (after normalisation) and the mask with ignore_index, which losses and
  /// metrics skip (ABI 1.6). Train samples all have the crop size and stack.
  std::vector<tp_field_batching_t> field_batching() const {
    if (train_) return {};
    if (!labelled()) return {tp::cpp::pad_field("image", 0.0)};
    return {tp::cpp::pad_field("image", 0.0), tp::cpp::pad_field("mask", transform_.ignore_index)};
  }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    const std::string& image_path = pairs_.images[index];
    const std::vector<unsigned char> bytes = tp::datasets::read_image_file(
        image_path, "segmentation_folder", max_image_pixels_, tp::datasets::kMaxImageFileBytes);
    const cv::Mat bgr = tp::datasets::decode_bgr(bytes, cv::IMREAD_COLOR, image_path, "segmentation_folder");
    if (!labelled()) { // `files`: the val transform of the image alone (a blank mask goes along, unused)
      seg::JointSample s = seg::transform_pair(bgr, cv::Mat::zeros(bgr.rows, bgr.cols, CV_8UC1), transform_, 0);
      out.add("image", std::move(s.pixels), {3, s.h, s.w});
      out.add("orig_size", std::vector<int64_t>{bgr.rows, bgr.cols}, {2});
      return;
    }
    const std::string& mask_path = pairs_.masks[index];
    const cv::Mat mask = read_mask(mask_path);
    if (mask.rows != bgr.rows || mask.cols != bgr.cols)
      throw Failure(TP_ERR_IO, "segmentation_folder: mask '" + mask_path + "' is " + std::to_string(mask.cols) + "x" +
                                   std::to_string(mask.rows) + " but its image '" + image_path + "' is " +
                                   std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows) + " (width x height)" +
                                   tp::datasets::exif_swap_hint(bgr.cols, bgr.rows, mask.cols, mask.rows));
    // The per-sample seed drives the train augmentation (PLG-8); val has none to draw.
    const uint64_t seed = train_ ? ctx.seed("train augmentation") : 0;
    seg::JointSample s = seg::transform_pair(bgr, mask, transform_, seed);
    out.add("image", std::move(s.pixels), {3, s.h, s.w});
    out.add("mask", std::move(s.mask), {s.h, s.w});
    // Val and test are only resized (no crop, no flip): the file's size is all a prediction needs
    // to map its pixels back onto the file (host predict, the inference library: pixel_maps.h).
    if (!train_) out.add("orig_size", std::vector<int64_t>{bgr.rows, bgr.cols}, {2});
  }

 private:
  /// false for `files`: images without masks.
  bool labelled() const { return !pairs_.masks.empty() || pairs_.images.empty(); }

  cv::Mat read_mask(const std::string& path) const {
    const std::vector<unsigned char> bytes = tp::datasets::read_image_file(
        path, "segmentation_folder", max_image_pixels_, tp::datasets::kMaxImageFileBytes);
    cv::Mat ids = colours_.empty() ? seg::decode_mask_png(bytes, seg::MaskPixels::kIndex, path)
                                   : colours_.map(seg::decode_mask_png(bytes, seg::MaskPixels::kColour, path), path);
    if (!value_map_.empty()) cv::LUT(ids, value_map_, ids);
    if (num_classes_ > 0) check_ids(ids, path);
    return ids;
  }

  /// Binary masks saved as 0/255 (Carvana, ISIC, most smp tutorials) make every foreground pixel
  /// the default ignore_index 255: the run learns background alone and scores a perfect mean IoU
  /// (dense trial F1). Up to kMasksChecked masks spread over the listing are read; when every one
  /// holds only 0 and ignore_index, and some hold ignore_index, the message names the fix. A
  /// dataset with real void borders (VOC) has classes besides 0 in nearly every mask. "" when the
  /// masks look right, are RGB (class_colors), or are not there.
  std::string ignored_foreground_warning() const {
    constexpr std::size_t kMasksChecked = 16;
    const std::size_t count = pairs_.masks.size();
    // A value map decides the values itself (reduce_zero_label makes every 0 the ignore value).
    if (count == 0 || !colours_.empty() || !value_map_.empty()) return "";
    std::size_t with_ignored = 0, checked = 0;
    for (std::size_t k = 0; k < std::min(count, kMasksChecked); ++k) {
      const std::string& path = pairs_.masks[k * count / std::min(count, kMasksChecked)];
      cv::Mat ids;
      try {
        ids = seg::decode_mask_png(tp::datasets::read_image_file(path, "segmentation_folder", max_image_pixels_,
                                                                 tp::datasets::kMaxImageFileBytes),
                                   seg::MaskPixels::kIndex, path);
      } catch (const std::exception&) {
        continue;  // a bad mask fails its own sample, with its own message
      }
      ++checked;
      const int ignored = cv::countNonZero(ids == transform_.ignore_index);
      if (cv::countNonZero(ids) != ignored) return "";  // a class other than 0: the masks hold class ids
      if (ignored > 0) ++with_ignored;
    }
    if (with_ignored == 0) return "";
    const std::string value = std::to_string(transform_.ignore_index);
    return "the " + std::to_string(checked) + " masks checked hold only the values 0 and " + value +
           ", and " + value + " is ignore_index: every pixel not 0 is ignored, so the run would learn class 0 "
           "alone and score a perfect mean IoU. Binary masks saved as 0/" + value + " need " + value +
           " read as class 1: set class_colors = [0, 0, 0, " + value + ", " + value + ", " + value +
           "] (greyscale masks are read as grey RGB colours then), or rewrite them as 0/1; if " + value +
           " really marks void pixels, ignore this.";
  }

  void check_ids(const cv::Mat& ids, const std::string& path) const {
    for (int y = 0; y < ids.rows; ++y) {
      const unsigned char* row = ids.ptr<unsigned char>(y);
      for (int x = 0; x < ids.cols; ++x)
        if (row[x] >= num_classes_ && row[x] != transform_.ignore_index)
          throw Failure(TP_ERR_IO, "segmentation_folder: mask '" + path + "' has the value " + std::to_string(row[x]) +
                                       " at pixel (x " + std::to_string(x) + ", y " + std::to_string(y) +
                                       "), outside [0, num_classes = " + std::to_string(num_classes_) +
                                       ") and not ignore_index " + std::to_string(transform_.ignore_index));
    }
  }

  seg::JointOptions transform_;
  seg::ColourTable colours_;
  cv::Mat value_map_; ///< mask_map or reduce_zero_label as a 256-entry table; empty: values as read
  std::vector<std::string> names_; ///< class_names: name k is mask value k
  int num_classes_ = 0;
  int64_t max_image_pixels_ = tp::datasets::kDefaultMaxImagePixels;
  bool train_ = false;
  seg::PairListing pairs_;
  tp::datasets::OpenCvThreadsPin pin_;  // OpenCV single-threaded while this instance lives
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("segmentation_folder", SegmentationFolderDataset, kDescriptor)
