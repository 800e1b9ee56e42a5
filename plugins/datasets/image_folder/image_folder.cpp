// The `image_folder` plugin: component org.torchhost.image_folder, a Tier S dataset of image
// files (root/<class>/*.jpg or a `path,label` CSV) decoded and transformed with OpenCV. This file
// is its schema, descriptor, DLPack image field and dataset class (tp/cpp/dataset_adapter.h makes the
// C ABI shell); image_listing.cpp finds the files, image_pipeline.cpp makes the pixels.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image_listing.h"
#include "image_pipeline.h"
#include "listing_cache.h"
#include "opencv_threads.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;
namespace ifo = tp::image_folder;

/* Schema */

const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "root", TP_CFG_PATH, nullptr,
     "train images: root/<class>/<file>; with `csv`, the directory relative paths start from"},
    {sizeof(tp_config_key_t), "csv", TP_CFG_PATH, "\"\"",
     "optional file of `path,label` rows listing the train images instead of class folders"},
    {sizeof(tp_config_key_t), "val_root", TP_CFG_PATH, "\"\"",
     "val images in class folders (same class names); empty: see val_csv, val_split"},
    {sizeof(tp_config_key_t), "val_csv", TP_CFG_PATH, "\"\"", "val images as a `path,label` file"},
    {sizeof(tp_config_key_t), "val_split", TP_CFG_FLOAT, "0.0",
     "without val_root/val_csv: fraction of the train listing held out as val (seeded by split_seed)"},
    {sizeof(tp_config_key_t), "split_seed", TP_CFG_INT, "0", "seed of the val_split choice"},
    {sizeof(tp_config_key_t), "test_root", TP_CFG_PATH, "\"\"",
     "test split (host eval/predict --split test): class folders like root's; \"\" = `root` of this table"},
    {sizeof(tp_config_key_t), "test_csv", TP_CFG_PATH, "\"\"", "test images as a `path,label` file"},
    {sizeof(tp_config_key_t), "cache", TP_CFG_BOOL, "false",
     "scan each class-folder tree once per node (prepare, on local rank 0) and reuse its listing while no "
     "folder changes"},
    {sizeof(tp_config_key_t), "cache_dir", TP_CFG_PATH, "\"\"",
     "where the listing caches go; \"\" = $XDG_CACHE_HOME/torchhost or ~/.cache/torchhost"},
    {sizeof(tp_config_key_t), "extensions", TP_CFG_STRING_ARRAY,
     "[\".jpg\", \".jpeg\", \".png\", \".bmp\", \".webp\"]", "file endings scanned in class folders (any case)"},
    {sizeof(tp_config_key_t), "resize", TP_CFG_INT_ARRAY, "[]",
     "[s]: shorter side to s; [h, w]: exact size; []: keep (both splits; train ignores it with random_resized_crop)"},
    {sizeof(tp_config_key_t), "center_crop", TP_CFG_INT_ARRAY, "[]", "[s] or [h, w] after resize; []: none"},
    {sizeof(tp_config_key_t), "random_resized_crop", TP_CFG_INT_ARRAY, "[]",
     "train only: [s] or [h, w] output of torchvision's RandomResizedCrop; []: none"},
    {sizeof(tp_config_key_t), "scale", TP_CFG_FLOAT_ARRAY, "[0.08, 1.0]", "random_resized_crop area range"},
    {sizeof(tp_config_key_t), "ratio", TP_CFG_FLOAT_ARRAY, "[0.75, 1.3333333333333333]",
     "random_resized_crop aspect (w/h) range"},
    {sizeof(tp_config_key_t), "hflip", TP_CFG_FLOAT, "0.0", "train only: probability of a horizontal flip"},
    {sizeof(tp_config_key_t), "brightness", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-b, 1+b]"},
    {sizeof(tp_config_key_t), "contrast", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-c, 1+c]"},
    {sizeof(tp_config_key_t), "saturation", TP_CFG_FLOAT, "0.0", "train only: colour jitter, factor in [1-s, 1+s]"},
    {sizeof(tp_config_key_t), "rand_augment", TP_CFG_INT_ARRAY, "[]",
     "train only: [N, M] torchvision RandAugment after the flip: N ops (0..14) at magnitude bin M (0..30 of 31); []: off"},
    {sizeof(tp_config_key_t), "trivial_augment", TP_CFG_BOOL, "false",
     "train only: torchvision TrivialAugmentWide (one op, random bin of 31) after the flip; not with rand_augment"},
    {sizeof(tp_config_key_t), "random_erasing", TP_CFG_FLOAT, "0.0",
     "train only: probability of torchvision RandomErasing on the normalised image (0 = off)"},
    {sizeof(tp_config_key_t), "erasing_scale", TP_CFG_FLOAT_ARRAY, "[0.02, 0.33]",
     "random_erasing: [lo, hi] erased fraction of the image area, 0 <= lo <= hi <= 1"},
    {sizeof(tp_config_key_t), "erasing_ratio", TP_CFG_FLOAT_ARRAY, "[0.3, 3.3]",
     "random_erasing: [lo, hi] aspect (h/w) range of the box, drawn log-uniformly, 0 < lo <= hi"},
    {sizeof(tp_config_key_t), "erasing_value", TP_CFG_STRING, "\"zero\"",
     "random_erasing: \"zero\" (0 after normalisation) or \"random\" (standard normal per value)"},
    {sizeof(tp_config_key_t), "mean", TP_CFG_FLOAT_ARRAY, "[0.0, 0.0, 0.0]", "RGB mean subtracted after scaling to [0, 1]"},
    {sizeof(tp_config_key_t), "std", TP_CFG_FLOAT_ARRAY, "[1.0, 1.0, 1.0]", "RGB std divided by after the mean"},
    {sizeof(tp_config_key_t), "channels_last", TP_CFG_BOOL, "false",
     "image memory HWC (strides), logical shape still [3, H, W]"},
    {sizeof(tp_config_key_t), "fast_decode", TP_CFG_BOOL, "true",
     "decode JPEGs at 1/2, 1/4, 1/8 scale when the crop is at least that much larger than the output"},
    {sizeof(tp_config_key_t), "max_image_pixels", TP_CFG_INT, tp::image_folder::kDefaultMaxImagePixelsText,
     tp::image_folder::kMaxImagePixelsHelp},
};

// get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.image_folder", "1.0.0",
    "image files in class folders or a CSV, decoded and augmented with OpenCV: image, label", kKeys);

/* Config */

ifo::Size2 read_size(const tp::cpp::ConfigReader& cfg, const char* key, bool allow_short, int* out_short) {
  const std::vector<int64_t> v = cfg.get_int_array(key);
  for (int64_t x : v) {
    if (x < 1 || x > 65535)
      throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " values must be in [1, 65535], got " +
                                       std::to_string(x));
  }
  if (v.empty()) return {};
  if (v.size() == 1) {
    if (allow_short) {
      *out_short = static_cast<int>(v[0]);
      return {};
    }
    return {static_cast<int>(v[0]), static_cast<int>(v[0])};
  }
  if (v.size() == 2) return {static_cast<int>(v[0]), static_cast<int>(v[1])};
  throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " must be [] , [s] or [h, w], got " +
                                   std::to_string(v.size()) + " values");
}

std::array<double, 2> read_range(const tp::cpp::ConfigReader& cfg, const char* key) {
  const std::vector<double> v = cfg.get_float_array(key);
  if (v.size() != 2 || !(v[0] > 0.0) || !(v[0] <= v[1]))
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " must be [lo, hi] with 0 < lo <= hi");
  return {v[0], v[1]};
}

std::array<float, 3> read_rgb(const tp::cpp::ConfigReader& cfg, const char* key, bool positive) {
  const std::vector<double> v = cfg.get_float_array(key);
  if (v.size() != 3)
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " needs 3 values (R, G, B), got " +
                                     std::to_string(v.size()));
  for (double x : v)
    if (positive && !(x > 0.0)) throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " values must be > 0");
  return {static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2])};
}

ifo::AugmentOptions read_augment(const tp::cpp::ConfigReader& cfg) {
  ifo::AugmentOptions a;
  const std::vector<int64_t> ra = cfg.get_int_array("rand_augment");
  const bool trivial = cfg.get_bool("trivial_augment");
  if (!ra.empty()) {
    if (ra.size() != 2)
      throw Failure(TP_ERR_CONFIG, "image_folder: rand_augment must be [] or [N, M], got " + std::to_string(ra.size()) +
                                       " values");
    if (ra[0] < 0 || ra[0] > ifo::kAugOpCount)
      throw Failure(TP_ERR_CONFIG, "image_folder: rand_augment N (number of ops) must be in [0, 14], got " +
                                       std::to_string(ra[0]));
    if (ra[1] < 0 || ra[1] >= ifo::kMagnitudeBins)
      throw Failure(TP_ERR_CONFIG, "image_folder: rand_augment M (magnitude bin) must be in [0, 30], got " +
                                       std::to_string(ra[1]));
    if (trivial)
      throw Failure(TP_ERR_CONFIG, "image_folder: set either rand_augment or trivial_augment, not both");
    a.kind = ifo::AugmentOptions::Kind::kRandAugment;
    a.num_ops = static_cast<int>(ra[0]);
    a.magnitude = static_cast<int>(ra[1]);
  } else if (trivial) {
    a.kind = ifo::AugmentOptions::Kind::kTrivialAugmentWide;
  }
  return a;
}

ifo::ErasingOptions read_erasing(const tp::cpp::ConfigReader& cfg) {
  ifo::ErasingOptions e;
  e.p = cfg.get_float_in("random_erasing", 0.0, 1.0);
  const std::vector<double> scale = cfg.get_float_array("erasing_scale");
  if (scale.size() != 2 || !(scale[0] >= 0.0) || !(scale[0] <= scale[1]) || !(scale[1] <= 1.0))
    throw Failure(TP_ERR_CONFIG, "image_folder: erasing_scale must be [lo, hi] with 0 <= lo <= hi <= 1");
  e.scale = {scale[0], scale[1]};
  e.ratio = read_range(cfg, "erasing_ratio");
  const std::string value = cfg.get_string("erasing_value");
  if (value != "zero" && value != "random")
    throw Failure(TP_ERR_CONFIG, "image_folder: erasing_value must be \"zero\" or \"random\", got \"" + value + "\"");
  e.random_value = value == "random";
  return e;
}

ifo::TransformOptions read_transform(const tp::cpp::ConfigReader& cfg, bool train) {
  ifo::TransformOptions t;
  t.resize = read_size(cfg, "resize", true, &t.resize_short);
  t.center_crop = read_size(cfg, "center_crop", false, nullptr);
  t.random_resized_crop = read_size(cfg, "random_resized_crop", false, nullptr);
  t.scale = read_range(cfg, "scale");
  if (t.scale[1] > 1.0) throw Failure(TP_ERR_CONFIG, "image_folder: scale must lie in (0, 1]");
  t.ratio = read_range(cfg, "ratio");
  t.hflip = cfg.get_float_in("hflip", 0.0, 1.0);
  t.brightness = cfg.get_float_in("brightness", 0.0, 1e6);
  t.contrast = cfg.get_float_in("contrast", 0.0, 1e6);
  t.saturation = cfg.get_float_in("saturation", 0.0, 1e6);
  t.augment = read_augment(cfg);
  t.erasing = read_erasing(cfg);
  t.mean = read_rgb(cfg, "mean", false);
  t.std = read_rgb(cfg, "std", true);
  t.channels_last = cfg.get_bool("channels_last");
  t.fast_decode = cfg.get_bool("fast_decode");
  t.max_image_pixels = cfg.get_int_in("max_image_pixels", 0, ifo::kMaxImagePixelsBound);
  t.random = train;
  // The val split has no random crop: a config with only random_resized_crop would give val
  // images of their natural sizes, which cannot be batched. Say so instead of failing in collate.
  if (!train && t.random_resized_crop.set() && !t.center_crop.set() && !t.resize.set())
    throw Failure(TP_ERR_CONFIG,
                  "image_folder: random_resized_crop applies to the train split only; set `center_crop` (and "
                  "usually `resize`) too, so val images get a fixed size (e.g. resize = [256], center_crop = [224])");
  return t;
}

/// How a folder scan uses the listing cache (`cache = true`): prepare refreshes it, create reads it.
enum class CacheUse { kOff, kRead, kRefresh };

struct ListingReader {
  std::vector<std::string> extensions;
  CacheUse cache = CacheUse::kOff;
  std::string cache_dir;

  ifo::Listing operator()(const std::string& root, const std::string& csv) const {
    if (!csv.empty()) return ifo::read_csv_listing(csv, root);
    if (cache == CacheUse::kOff) return ifo::scan_folder(root, extensions);
    const std::string path = ifo::listing_cache_path(cache_dir, root, extensions);
    if (auto cached = ifo::read_listing_cache(path, root, extensions)) return std::move(*cached);
    std::vector<std::string> walked;
    ifo::Listing listing = ifo::scan_folder(root, extensions, &walked);
    if (cache == CacheUse::kRefresh) ifo::write_listing_cache(path, root, extensions, listing, walked);
    return listing;
  }
};

/// A held-out split (val or test) read from its own folder or listing. Without a listing its class
/// ids come from folder names, so its folders must name the training root's classes.
ifo::Listing held_out_listing(const ListingReader& read_listing, const std::string& root, const std::string& csv,
                              const std::string& split_root, const std::string& split_csv, const char* root_key) {
  ifo::Listing held_out = read_listing(split_root.empty() ? root : split_root, split_csv);
  if (split_csv.empty() && csv.empty() && !root.empty()) {
    ifo::Listing train_listing = read_listing(root, csv);
    if (train_listing.classes != held_out.classes)
      throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + root_key + " '" + split_root + "' has " +
                                       std::to_string(held_out.classes.size()) + " class folders that differ from root's " +
                                       std::to_string(train_listing.classes.size()) +
                                       "; both need the same class sub-folders so labels agree");
  }
  return held_out;
}

ifo::Listing listing_for(const tp::cpp::ConfigReader& cfg, tp::cpp::Split split, CacheUse cache) {
  const ListingReader read_listing{cfg.get_string_array("extensions"), cfg.get_bool("cache") ? cache : CacheUse::kOff,
                                   cfg.get_string("cache_dir")};
  const std::string root = cfg.get_string("root");
  if (split == tp::cpp::Split::kTest) {
    // Like val_root/val_csv, the test split reads only test_root/test_csv: from the training
    // table (data.test_from_train) `root` is the training folder, and serving it as the test set
    // would score the model on the images it trained on.
    const std::string test_root = cfg.get_string("test_root");
    const std::string test_csv = cfg.get_string("test_csv");
    if (test_root.empty() && test_csv.empty())
      throw Failure(TP_ERR_CONFIG, "image_folder: the test split needs `test_root` (class folders) or `test_csv`; "
                                   "without them it would read the training images of `root`");
    return held_out_listing(read_listing, root, cfg.get_string("csv"), test_root, test_csv, "test_root");
  }
  const bool train = split == tp::cpp::Split::kTrain;
  const std::string csv = cfg.get_string("csv");
  const std::string val_root = cfg.get_string("val_root");
  const std::string val_csv = cfg.get_string("val_csv");
  const double val_split = cfg.get_float_in("val_split", 0.0, 1.0);
  const bool separate_val = !val_root.empty() || !val_csv.empty();
  if (separate_val && val_split > 0.0)
    throw Failure(TP_ERR_CONFIG, "image_folder: set either val_root/val_csv or val_split, not both");
  if (root.empty()) throw Failure(TP_ERR_CONFIG, "image_folder: `root` is empty; set it to the image directory");
  if (val_split > 0.0) {
    auto parts = ifo::split_listing(read_listing(root, csv), val_split,
                                    static_cast<uint64_t>(cfg.get_int("split_seed")));
    return train ? std::move(parts.first) : std::move(parts.second);
  }
  if (train || !separate_val) {
    if (!train)
      throw Failure(TP_ERR_CONFIG,
                    "image_folder: the val split needs `val_root`, `val_csv` or `val_split` > 0 (or set "
                    "eval.strategy = \"no\")");
    return read_listing(root, csv);
  }
  return held_out_listing(read_listing, root, csv, val_root, val_csv, "val_root");
}

/// A DLPack [3, h, w] float tensor owning `pixels`; HWC memory (strides {1, 3w, 3}) when
/// channels_last, compact CHW otherwise.
struct OwnedImage {
  DLManagedTensor managed{};
  std::vector<float> pixels;
  int64_t shape[3];
  int64_t strides[3];
};

void delete_image(DLManagedTensor* t) { delete static_cast<OwnedImage*>(t->manager_ctx); }

tp_field_t make_image_field(ifo::Image&& image, bool channels_last) {
  auto owned = std::make_unique<OwnedImage>();
  owned->pixels = std::move(image.pixels);
  owned->shape[0] = 3;
  owned->shape[1] = image.h;
  owned->shape[2] = image.w;
  owned->strides[0] = 1;
  owned->strides[1] = 3 * static_cast<int64_t>(image.w);
  owned->strides[2] = 3;
  DLTensor& t = owned->managed.dl_tensor;
  t.data = owned->pixels.data();
  t.device = {kDLCPU, 0};
  t.ndim = 3;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = owned->shape;
  t.strides = channels_last ? owned->strides : nullptr;
  t.byte_offset = 0;
  owned->managed.manager_ctx = owned.get();
  owned->managed.deleter = &delete_image;
  return tp_field_t{"image", &owned.release()->managed};
}

/* Instance */

/// One split. Immutable after construction, so get_sample needs no locking; handed-out tensors
/// own their pixels, so nothing outlives it (PLG-13).
class ImageFolderDataset {
 public:
  /// The test split reads like val (no augmentation), from test_root/test_csv or its own table.
  static constexpr bool kHasTestSplit = true;

  /// Once per node before any rank creates the split (ABI 1.5): with `cache = true`, scans the
  /// folders and writes their listing cache, which create then reads.
  static void prepare(const tp::cpp::DatasetArgs& args) {
    if (!args.config.get_bool("cache")) return;
    const ifo::Listing listing = listing_for(args.config, args.split, CacheUse::kRefresh);
    args.log(TP_LOG_INFO, std::string("image_folder (") + args.split_name + "): listing of " +
                              std::to_string(listing.paths.size()) + " images cached");
  }

  explicit ImageFolderDataset(const tp::cpp::DatasetArgs& args)
      : transform_(read_transform(args.config, args.train())),
        listing_(listing_for(args.config, args.split, CacheUse::kRead)) {
    args.log(TP_LOG_INFO, std::string("image_folder (") + args.split_name + "): " +
                              std::to_string(listing_.paths.size()) + " images, " +
                              std::to_string(listing_.classes.size()) + " classes");
  }

  uint64_t size() const { return listing_.paths.size(); }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    // The per-sample seed drives the train augmentation (PLG-8); val has none to draw.
    const uint64_t seed = transform_.random ? ctx.seed("train augmentation") : ctx.has_seed() ? ctx.raw()->seed : 0;
    ifo::Image image = ifo::load_image(listing_.paths[index], transform_, seed);
    out.add(make_image_field(std::move(image), transform_.channels_last));
    out.add("label", std::vector<int64_t>{listing_.labels[index]}, {});
  }

 private:
  ifo::TransformOptions transform_;
  ifo::Listing listing_;
  ifo::OpenCvThreadsPin pin_;  // OpenCV single-threaded while this instance lives
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("image_folder", ImageFolderDataset, kDescriptor)
