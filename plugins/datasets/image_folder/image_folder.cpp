// The `image_folder` plugin: component org.torchhost.image_folder, a Tier S dataset of image
// files (root/<class>/*.jpg or a `path,label` CSV) decoded and transformed with OpenCV. This file
// is its schema, its splits and its dataset class (tp/cpp/dataset_adapter.h makes the C ABI shell);
// image_listing.cpp finds the files; the transform keys, the pixels and the image field are the
// library tp_image_transforms (transform_config.cpp, image_pipeline.cpp, image_field.cpp), shared
// with webdataset.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cache_dir.h"
#include "class_split.h"
#include "image_extensions.h"
#include "image_field.h"
#include "image_pipeline.h"
#include "opencv_threads.h"
#include "split_listing.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/cpp/guard.h"
#include "tp/tp.h"
#include "transform_config.h"

namespace {

namespace ds = tp::datasets;
namespace ifo = tp::image_folder;

/* Schema */

constexpr tp_config_key_t kOwnKeys[] = {
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
    {sizeof(tp_config_key_t), "val_split_stratified", TP_CFG_BOOL, "false",
     "val_split per class: each class holds out its share (scikit-learn's train_test_split(stratify=y) counts), so "
     "a rare class keeps val and training images; false: one seeded draw over all images"},
    {sizeof(tp_config_key_t), "test_root", TP_CFG_PATH, "\"\"",
     "test split (host eval/predict --split test): class folders like root's; this or test_csv is required "
     "for that split, never `root` (the training images)"},
    {sizeof(tp_config_key_t), "test_csv", TP_CFG_PATH, "\"\"", "test images as a `path,label` file"},
    {sizeof(tp_config_key_t), "allow_outside_root", TP_CFG_BOOL, "false",
     "true: a csv row's path may be absolute or climb out of `root` with '..' (false refuses the csv at start-up, "
     "naming its line)"},
    {sizeof(tp_config_key_t), "multi_label", TP_CFG_BOOL, "false",
     "true: each csv row's label cell lists any number of labels (split at label_separator); \"label\" is then "
     "multi-hot float32 [C] (org.torchhost.bce_with_logits, org.torchhost.multilabel)"},
    {sizeof(tp_config_key_t), "label_separator", TP_CFG_STRING, "\";\"",
     "multi_label: what separates a row's labels (\" \" for Kaggle-style \"cat dog\"; spaces around labels trimmed)"},
    {sizeof(tp_config_key_t), "cache", TP_CFG_BOOL, "false",
     "scan each class-folder tree once per node (prepare, on local rank 0) and reuse its listing while no "
     "folder changes"},
    {sizeof(tp_config_key_t), "cache_dir", TP_CFG_PATH, "\"\"",
     "where the listing caches go; \"\" = $XDG_CACHE_HOME/torchhost or ~/.cache/torchhost"},
    {sizeof(tp_config_key_t), "extensions", TP_CFG_STRING_ARRAY, ds::kImageFolderExtensionsToml,
     "file endings scanned in class folders (any case); the default is torchvision's IMG_EXTENSIONS"},
    {sizeof(tp_config_key_t), "files", TP_CFG_STRING_ARRAY, "[]",
     "val/test only: these image files, in this order and without labels, instead of the split's folders or CSV "
     "(host predict --images sets it)"},
};
// The transform keys (resize ... max_image_pixels) follow, shared with webdataset.
constexpr auto kKeys = ds::join_keys(kOwnKeys, ds::kTransformKeys);

// get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.image_folder", "1.0.0",
    "image files in class folders or a CSV, decoded and augmented with OpenCV: image, label", kKeys.keys);

/* Config */

/// `files` (host predict --images, docs/predict.md): new images to predict, read with the split's
/// evaluation transform. They have no label, so the training split, whose loss needs one, refuses them.
std::vector<std::string> unlabelled_files(const tp::cpp::DatasetArgs& args) {
  std::vector<std::string> files = args.config.get_string_array("files");
  if (!files.empty() && args.train())
    throw tp::cpp::Failure(TP_ERR_CONFIG, "image_folder: `files` (images without labels) serves the val and test "
                                          "splits only; the train split needs labelled folders or a CSV");
  return files;
}

/// A held-out split read from the training images themselves (val_root = root, val_csv = csv, and
/// the same for test): its scores are the training set's, optimistic without a word (data trial
/// F25, a copy-paste slip). Warned of once, by the held-out split.
void warn_held_out_is_training(const tp::cpp::DatasetArgs& args) {
  if (args.train() || !unlabelled_files(args).empty()) return;
  const ifo::ListingKeys keys = ifo::read_listing_keys(args.config);
  const bool test = std::string(args.split_name) == "test";
  const std::string& held_root = test ? keys.test_root : keys.val_root;
  const std::string& held_csv = test ? keys.test_csv : keys.val_csv;
  const auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    return !a.empty() && !b.empty() && std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
  };
  const bool from_training = keys.csv.empty() ? held_csv.empty() && same(held_root, keys.root) : same(held_csv, keys.csv);
  if (!from_training) return;
  const std::string key = std::string(test ? "test" : "val") + (keys.csv.empty() ? "_root" : "_csv");
  args.log(TP_LOG_WARNING, std::string("image_folder (") + args.split_name + "): `" + key +
                               "` names the training images themselves, so this split scores the model on what it "
                               "trained on; give it held-out images (or val_split to hold some out)");
}

ifo::Listing listing_for(const tp::cpp::DatasetArgs& args, ifo::CacheUse cache) {
  if (std::vector<std::string> files = unlabelled_files(args); !files.empty()) {
    ifo::Listing given;
    given.paths = std::move(files);
    return given;
  }
  return ifo::listing_of_split(ifo::read_listing_keys(args.config), args.split_name,
                               args.config.get_bool("cache") ? cache : ifo::CacheUse::kOff);
}

// A class without a training image (an empty class folder, or a CSV label name absent here):
// torchvision's ImageFolder refuses it ("Found no valid file for the classes ..."); here the held
// out splits may keep such a folder to align their labels, so training warns rather than refuses:
// a head trained for a class it never sees (a fine-tuning trial's stray `zebra` folder).
// A class that val_split left without training images is not one: the split's own warning names
// it (split_listing), with val_split as the cause.
void warn_empty_classes(const tp::cpp::DatasetArgs& args, const ifo::Listing& listing) {
  const std::vector<std::size_t> count = ifo::class_counts(listing);
  std::string empty;
  std::size_t how_many = 0;
  for (std::size_t c = 0; c < count.size(); ++c) {
    if (count[c] != 0 || (c < listing.split_totals.size() && listing.split_totals[c] != 0) || ++how_many > 10) continue;
    // What the folder does hold, when anything: a class of .heic photos is not an empty folder.
    const std::string held = c < listing.unlisted.size() ? ifo::describe_endings(listing.unlisted[c]) : "";
    empty += (empty.empty() ? "'" : ", '") + listing.classes[c] + "'" +
             (held.empty() ? "" : ": " + held + " whose ending is not in `extensions`");
  }
  if (how_many == 0) return;
  args.log(TP_LOG_WARNING, "image_folder (train): " + std::to_string(how_many) + " of " +
                               std::to_string(count.size()) + " classes have no training image (" + empty +
                               (how_many > 10 ? ", ..." : "") + "): the model learns a class it never sees. Remove the "
                               "empty class folder, or add its images, unless the labels must stay aligned with "
                               "another dataset's");
}

/// The files of the class folders the scan left out by their ending (image_listing.h
/// unlisted_note), in one line: a warning when some look like images.
void log_unlisted(const tp::cpp::DatasetArgs& args, const ifo::Listing& listing) {
  const ifo::UnlistedNote note = ifo::unlisted_note(listing);
  if (note.text.empty()) return;
  args.log(note.images ? TP_LOG_WARNING : TP_LOG_INFO, std::string("image_folder (") + args.split_name + "): " + note.text);
}

/// The folders at the root that are not classes (image_listing.h is_hidden_folder), in one info
/// line: a user who meant `.data` to be a class learns why it is not, and one who did not sees
/// that the class ids are those of the other folders.
void log_skipped_folders(const tp::cpp::DatasetArgs& args, const ifo::Listing& listing) {
  if (listing.skipped_folders.empty()) return;
  args.log(TP_LOG_INFO, std::string("image_folder (") + args.split_name + "): " +
                            std::to_string(listing.skipped_folders.size()) + " hidden folder" +
                            (listing.skipped_folders.size() == 1 ? "" : "s") + " at the root " +
                            (listing.skipped_folders.size() == 1 ? "is" : "are") + " not a class (" +
                            ifo::skipped_folders_text(listing) +
                            "): folders whose name begins with '.' and __MACOSX are left out, so they shift no class "
                            "id; rename a folder that is meant to be a class");
}

/// The links the scan did not follow because they loop (folder_walk.h), once each: a warning,
/// since the user may have meant the link to reach other images.
void warn_loops(const tp::cpp::DatasetArgs& args, const ifo::Listing& listing) {
  for (const std::string& loop : listing.loops)
    args.log(TP_LOG_WARNING, std::string("image_folder (") + args.split_name + "): '" + loop +
                                 "' links back to a folder it is inside (a link loop): not followed, so each image "
                                 "is listed once (torchvision's os.walk would list them again on each of some 40 "
                                 "rounds); remove the link if it is a mistake");
}

/// With `cache = true` and a `cache_dir` of another user that only its owner writes (a team's,
/// set up as it should be: read only here), whether this split's listing came from it: an info
/// line when it did, a warning when it held none up to date (then every run scans the folders).
/// A cache_dir others can write was warned about in prepare.
void log_shared_cache(const tp::cpp::DatasetArgs& args, const ifo::Listing& listing) {
  const std::string cache_dir = args.config.get_string("cache_dir");
  if (!args.config.get_bool("cache") || cache_dir.empty()) return;
  const ds::WriteRefusal refusal = ds::shared_write_refusal(cache_dir);
  if (refusal.reason.empty() || refusal.warn) return;
  const std::string head = std::string("image_folder (") + args.split_name + "): the listing cache in '" + cache_dir +
                           "': " + refusal.reason;
  if (listing.from_cache)
    args.log(TP_LOG_INFO, head + "; this split's listing was read from it");
  else
    args.log(TP_LOG_WARNING, head + "; it holds no up-to-date listing of these folders, so they were scanned (on "
                                    "every run, until its owner runs with cache = true again)");
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
    // Given files are not a folder scan: nothing to cache.
    if (!args.config.get_bool("cache") || !unlabelled_files(args).empty()) return;
    const std::string cache_dir = args.config.get_string("cache_dir");
    if (const ds::WriteRefusal refusal = cache_dir.empty() ? ds::WriteRefusal{} : ds::shared_write_refusal(cache_dir);
        !refusal.reason.empty()) {
      // Another user's cache that only its owner writes is how a team shares one: create says
      // whether the listing came from it (log_shared_cache), without a warning here.
      if (refusal.warn)
        args.log(TP_LOG_WARNING, std::string("image_folder (") + args.split_name + "): the listing cache in '" +
                                     cache_dir + "' is not used: " + refusal.reason);
      return;
    }
    const ifo::Listing listing = listing_for(args, ifo::CacheUse::kRefresh);
    warn_loops(args, listing);  // create reads the cache, which keeps neither these
    log_unlisted(args, listing);  // nor these
    log_skipped_folders(args, listing);  // nor these
    args.log(TP_LOG_INFO, std::string("image_folder (") + args.split_name + "): listing of " +
                              std::to_string(listing.paths.size()) + " images " +
                              (listing.from_cache ? "read from the cache (up to date)" : "cached"));
  }

  explicit ImageFolderDataset(const tp::cpp::DatasetArgs& args)
      : transform_(ds::read_transform(args.config, args.train(), "image_folder")),
        encoded_refusal_(ds::encoded_image_refusal(transform_)),
        listing_(listing_for(args, ifo::CacheUse::kRead)),
        labelled_(listing_.labels.size() == listing_.paths.size() || listing_.label_sets.size() == listing_.paths.size()) {
    warn_held_out_is_training(args);
    warn_loops(args, listing_);
    log_unlisted(args, listing_);
    log_skipped_folders(args, listing_);
    for (const std::string& warning : listing_.warnings)
      args.log(TP_LOG_WARNING, std::string("image_folder (") + args.split_name + "): " + warning);
    log_shared_cache(args, listing_);
    if (args.train() && labelled_) warn_empty_classes(args, listing_);
    // The counts per class (data trial F4): a long tail shows here, not in a script of the user's.
    const std::vector<std::size_t> counts = labelled_ ? ifo::class_counts(listing_) : std::vector<std::size_t>{};
    args.log(TP_LOG_INFO, std::string("image_folder (") + args.split_name + "): " +
                              std::to_string(listing_.paths.size()) + " images, " +
                              (labelled_ ? std::to_string(listing_.classes.size()) + " classes" : "no labels (`files`)") +
                              (listing_.from_cache ? " (listing read from the cache)" : "") +
                              (counts.empty() ? "" : "; " + ifo::class_counts_text(listing_.classes, counts)));
    // The loss weights of the imbalance, ready to paste; one class per image only (cross-entropy's).
    if (args.train() && labelled_ && listing_.label_sets.empty())
      if (const std::string line = ifo::class_weights_line(counts); !line.empty())
        args.log(TP_LOG_INFO, "image_folder (train): " + line);
  }

  uint64_t size() const { return listing_.paths.size(); }

  /// "image" for the host to decode on the device (ABI 1.11): available when this split's
  /// transform is crop, resize, flip and normalisation to a fixed size; else the keys that prevent it.
  std::vector<tp_encoded_image_t> encoded_images() const {
    return {ds::encoded_image_declaration(transform_, encoded_refusal_)};
  }

  /// The class folder names (or a CSV's label names) in label-id order (ABI 1.12), for exports and
  /// predictions; nothing for a CSV of integer labels, whose classes are named only by their ids.
  tp::cpp::ClassNames class_names() const {
    bool ids_only = true;
    for (std::size_t id = 0; id < listing_.classes.size() && ids_only; ++id)
      ids_only = listing_.classes[id] == std::to_string(id);
    return {"label", ids_only ? std::vector<std::string>{} : listing_.classes};
  }

  /// Each sample's file, as read (ABI 1.13): host predict's `path` column for a split.
  std::vector<std::string> sample_keys() const { return listing_.paths; }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    // The per-sample seed drives the train augmentation (PLG-8); val has none to draw.
    const uint64_t seed = transform_.random ? ctx.seed("train augmentation") : ctx.has_seed() ? ctx.raw()->seed : 0;
    const std::string& path = listing_.paths[index];
    if (encoded_refusal_.empty() && ctx.encoded_images()) {
      // The file's bytes and the crop the CPU path would cut (PLG-19); the host decodes them.
      std::vector<unsigned char> bytes = ds::read_image_file(path, transform_.component, transform_.max_image_pixels,
                                                                  ds::kMaxImageFileBytes);
      const ds::ImageBox box = ds::encoded_box(bytes, path, transform_, seed);
      ds::add_encoded_image(out, std::move(bytes), box);
    } else if (ds::makes_views(transform_)) {
      ds::add_image_views(out, ds::read_image_file(path, transform_.component, transform_.max_image_pixels,
                                                   ds::kMaxImageFileBytes),
                          path, transform_, seed);
    } else {
      out.add(ds::make_image_field(ds::load_image(path, transform_, seed), transform_.channels_last));
    }
    if (!labelled_) return;
    if (listing_.label_sets.empty()) {
      out.add("label", std::vector<int64_t>{listing_.labels[index]}, {});
      return;
    }
    // multi_label: one 0/1 per class, as BCEWithLogitsLoss and torchmetrics' Multilabel* read them.
    std::vector<float> hot(listing_.classes.size(), 0.0F);
    for (const int64_t id : listing_.label_sets[index]) hot[static_cast<std::size_t>(id)] = 1.0F;
    out.add("label", std::move(hot), {static_cast<int64_t>(listing_.classes.size())});
  }

 private:
  ds::TransformOptions transform_;
  std::string encoded_refusal_;  // "": "image" can be handed over encoded (lent by encoded_images())
  ifo::Listing listing_;
  bool labelled_;  // false for `files`: every sample is "image" alone
  ds::OpenCvThreadsPin pin_;  // OpenCV single-threaded while this instance lives
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("image_folder", ImageFolderDataset, kDescriptor)
