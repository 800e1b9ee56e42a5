// The class names of a split's shards, for the dataset to lend (ABI 1.12, class_names): those of
// the `<prefix>-shards.json` that `host shards write` puts beside the shards it writes, or the
// `class_names` key for shards made elsewhere. Without them an image_folder moved to shards lost
// its names: host predict wrote no `.class` column and host export no `torchhost.classes`
// (data trial F12).
#pragma once

#include <string>
#include <vector>

namespace tp::webdataset {

/// Where a split's class names come from, and the names.
struct ShardClasses {
  std::vector<std::string> names;  ///< by class id; empty: the classes are named only by their ids
  std::string source;              ///< "class_names" or the description file's path; "" when none
  /// The description's "source"."root": the folder each sample's json `source` is relative to
  /// (host shards write's), which host predict's row names join it to; "" when none.
  std::string source_root;
};

/// The description `host shards write` wrote for the shards of `pattern` (as the config gives
/// it): the file `<dir>/<prefix>-shards.json` beside them whose "pattern" is the pattern's file
/// name, else the one whose prefix begins the pattern's file name (the longest); "" when none.
std::string find_shard_description(const std::string& pattern);

/// The class names of the shards of `pattern` (config key `key`): `configured` (the `class_names`
/// key) when not empty, else the description's "classes" (find_shard_description), else none.
/// Names equal to their ids ("0", "1", ...: an integer-labelled CSV's) are no names, as
/// image_folder lends none for them. Throws tp::cpp::Failure(TP_ERR_CONFIG) naming the key or the
/// file when a name is not UTF-8 text without control characters, when two names are the same,
/// when the description cannot be read as JSON or its "classes" are not strings, and when
/// `configured` names another number of classes than the description beside the shards.
ShardClasses shard_classes(const std::string& pattern, const char* key, const std::vector<std::string>& configured);

}  // namespace tp::webdataset
