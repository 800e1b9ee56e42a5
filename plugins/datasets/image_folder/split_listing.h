// Which files and labels each split of an image_folder table holds, from the table's keys: the
// training folder or CSV, a held-out val or test folder or CSV, or a seeded val_split of the
// training listing, with the listing cache when the table asks for it. One function for the
// plugin (its create and prepare) and for `host shards write`, so shards hold exactly the
// samples the plugin serves, in its order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image_listing.h"
#include "tp/cpp/config.h"

namespace tp::image_folder {

/// How a folder scan uses the listing cache (`cache = true`): prepare refreshes it, create reads
/// it; kOff scans (a CSV listing is always read directly).
enum class CacheUse { kOff, kRead, kRefresh };

/// The keys of an image_folder table that choose its files (paths already resolved).
struct ListingKeys {
  std::string root, csv;            ///< the training images: class folders, or a `path,label` CSV under root
  std::string val_root, val_csv;    ///< a held-out val split (either)
  std::string test_root, test_csv;  ///< the test split (either; required for "test")
  double val_split = 0.0;           ///< without val_root/val_csv: the fraction of the training listing held out
  bool val_split_stratified = false;  ///< each class holds out its share (class_split.h stratified_holdout)
  uint64_t split_seed = 0;          ///< the seed of that hold-out
  std::vector<std::string> extensions;  ///< file endings scanned in class folders
  std::string cache_dir;            ///< the listing cache's directory ("" = the per-user default)
  bool allow_outside_root = false;  ///< a CSV row may be absolute or climb out of its root with '..'
  /// `multi_label = true`: what separates a CSV row's labels (`label_separator`); "" = one label a row.
  std::string label_separator;
};

/// The listing keys of an image_folder table, read and checked as the plugin reads them (val_split
/// within [0, 1]). One reader for the plugin and for `host shards write`, which hands it the
/// same C view of the table the plugin's create gets, so the two cannot disagree on a key.
/// Throws tp::cpp::Failure (TP_ERR_CONFIG) naming a key that is missing or out of range.
ListingKeys read_listing_keys(const tp::cpp::ConfigReader& cfg);

/// The listing of `split` ("train", "val" or "test") for `keys`. Throws tp::cpp::Failure
/// (TP_ERR_CONFIG) naming the keys when they contradict each other or a split has no source
/// (val without val_root/val_csv/val_split; test without test_root/test_csv: it would read the
/// training images), when a held-out folder's classes differ from root's, and what scan_folder,
/// read_csv_listing (csv_listing.h) and split_listing throw.
Listing listing_of_split(const ListingKeys& keys, const std::string& split, CacheUse cache = CacheUse::kOff);

}  // namespace tp::image_folder
