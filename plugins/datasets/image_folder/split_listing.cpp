#include "split_listing.h"

#include <algorithm>
#include <utility>

#include "csv_listing.h"
#include "listing_cache.h"
#include "name_lookalikes.h"
#include "tp/cpp/guard.h"

namespace tp::image_folder {
namespace {

using tp::cpp::Failure;

struct ListingReader {
  const ListingKeys& keys;
  CacheUse cache = CacheUse::kOff;

  /// The listing of `root` (or `csv`); `key` names the config key that gave `root` in messages.
  Listing operator()(const std::string& root, const std::string& csv, const char* key = "root") const {
    if (!csv.empty()) return read_csv_listing(csv, root, keys.allow_outside_root, keys.label_separator);
    if (!keys.label_separator.empty())
      throw Failure(TP_ERR_CONFIG, std::string("image_folder: multi_label = true, but `") + key +
                                       "` gives class folders (one label per image); give this split a csv listing");
    if (cache == CacheUse::kOff) return scan_folder(root, keys.extensions, nullptr, key);
    const std::string path = listing_cache_path(keys.cache_dir, root, keys.extensions);
    if (auto cached = read_listing_cache(path, root, keys.extensions)) {
      cached->from_cache = true;
      return std::move(*cached);
    }
    std::vector<std::string> walked;
    Listing listing = scan_folder(root, keys.extensions, &walked, key);
    if (cache == CacheUse::kRefresh) write_listing_cache(path, root, keys.extensions, listing, walked);
    return listing;
  }
};

/// A held-out split (val or test) read from its own folder or listing. Without a listing its class
/// ids come from folder names, so its folders must name the training root's classes.
Listing held_out_listing(const ListingReader& read_listing, const std::string& split_root, const std::string& split_csv,
                         const char* root_key) {
  const ListingKeys& keys = read_listing.keys;
  Listing held_out = read_listing(split_root.empty() ? keys.root : split_root, split_csv,
                                  split_root.empty() ? "root" : root_key);
  if (split_csv.empty() && keys.csv.empty() && !keys.root.empty()) {
    Listing train_listing = read_listing(keys.root, keys.csv);
    if (train_listing.classes != held_out.classes) {
      // Which folders: a user with 100 classes cannot find the one missing from a count.
      const auto absent_from = [](const std::vector<std::string>& names, const std::vector<std::string>& from) {
        std::vector<std::string> absent;
        for (const std::string& name : names)
          if (std::find(from.begin(), from.end(), name) == from.end()) absent.push_back(name);
        return absent;
      };
      const auto listed = [](const std::vector<std::string>& names) {
        std::string text;
        for (std::size_t i = 0; i < names.size() && i <= 10; ++i)
          text += (i == 0 ? "" : ", ") + (i < 10 ? "'" + names[i] + "'" : std::string("..."));
        return text;
      };
      const std::vector<std::string> absent_here = absent_from(train_listing.classes, held_out.classes);
      const std::vector<std::string> absent_in_root = absent_from(held_out.classes, train_listing.classes);
      const std::string missing = listed(absent_here);
      const std::string extra = listed(absent_in_root);
      // Names that print alike (a macOS copy's decomposed 'café'): the lists above read the same.
      const std::string lookalikes = lookalike_note(absent_here, absent_in_root, std::string(root_key) + " '" +
                                                    split_root + "'", keys.root, split_root);
      throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + root_key + " '" + split_root + "' has " +
                                       std::to_string(held_out.classes.size()) + " class folders that differ from root's " +
                                       std::to_string(train_listing.classes.size()) + " (" +
                                       (missing.empty() ? "" : "missing here: " + missing) +
                                       (missing.empty() || extra.empty() ? "" : "; ") +
                                       (extra.empty() ? "" : "not in root: " + extra) +
                                       "); both need the same class sub-folders so labels agree (a class with no "
                                       "image in this split may be an empty folder)" + lookalikes);
    }
  }
  return held_out;
}

}  // namespace

ListingKeys read_listing_keys(const tp::cpp::ConfigReader& cfg) {
  ListingKeys keys;
  keys.root = cfg.get_string("root");
  keys.csv = cfg.get_string("csv");
  keys.val_root = cfg.get_string("val_root");
  keys.val_csv = cfg.get_string("val_csv");
  keys.test_root = cfg.get_string("test_root");
  keys.test_csv = cfg.get_string("test_csv");
  keys.val_split = cfg.get_float_in("val_split", 0.0, 1.0);
  keys.split_seed = static_cast<uint64_t>(cfg.get_int("split_seed"));
  keys.val_split_stratified = cfg.get_bool("val_split_stratified");
  keys.extensions = cfg.get_string_array("extensions");
  keys.cache_dir = cfg.get_string("cache_dir");
  keys.allow_outside_root = cfg.get_bool("allow_outside_root");
  if (cfg.get_bool("multi_label")) {
    keys.label_separator = cfg.get_string("label_separator");
    if (keys.label_separator.empty())
      throw Failure(TP_ERR_CONFIG, "image_folder: multi_label = true needs a label_separator (\";\", \" \", \"|\"): what "
                                   "separates the labels of a csv row");
    if (keys.csv.empty())
      throw Failure(TP_ERR_CONFIG, "image_folder: multi_label = true reads the labels of each image from a csv listing "
                                   "(`csv`, and `val_csv` / `test_csv` for held-out splits): class folders give one "
                                   "label per image. Set `csv` to a file of `path,labels` rows");
  }
  return keys;
}

Listing listing_of_split(const ListingKeys& keys, const std::string& split, CacheUse cache) {
  const ListingReader read_listing{keys, cache};
  if (split == "test") {
    // Like val_root/val_csv, the test split reads only test_root/test_csv: from the training
    // table (data.test_from_train) `root` is the training folder, and serving it as the test set
    // would score the model on the images it trained on.
    if (keys.test_root.empty() && keys.test_csv.empty())
      throw Failure(TP_ERR_CONFIG, "image_folder: the test split needs `test_root` (class folders) or `test_csv`; "
                                   "without them it would read the training images of `root`");
    return held_out_listing(read_listing, keys.test_root, keys.test_csv, "test_root");
  }
  const bool train = split == "train";
  const bool separate_val = !keys.val_root.empty() || !keys.val_csv.empty();
  if (separate_val && keys.val_split > 0.0)
    throw Failure(TP_ERR_CONFIG, "image_folder: set either val_root/val_csv or val_split, not both");
  if (keys.root.empty()) throw Failure(TP_ERR_CONFIG, "image_folder: `root` is empty; set it to the image directory");
  if (keys.val_split > 0.0) {
    auto parts = split_listing(read_listing(keys.root, keys.csv), keys.val_split, keys.split_seed,
                               keys.val_split_stratified);
    return train ? std::move(parts.first) : std::move(parts.second);
  }
  if (train || !separate_val) {
    if (!train)
      throw Failure(TP_ERR_CONFIG,
                    "image_folder: the val split needs `val_root`, `val_csv` or `val_split` > 0 (or set "
                    "eval.strategy = \"no\")");
    return read_listing(keys.root, keys.csv);
  }
  return held_out_listing(read_listing, keys.val_root, keys.val_csv, "val_root");
}

}  // namespace tp::image_folder
