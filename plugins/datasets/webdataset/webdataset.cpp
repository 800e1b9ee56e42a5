// The `webdataset` plugin: component org.torchhost.webdataset, a Tier S dataset of WebDataset tar
// shards (members `<key>.<ext>`, a sample per key) decoded and transformed with OpenCV as
// image_folder's images are. This file is its schema, its splits and its dataset class
// (tp/cpp/dataset_adapter.h makes the C ABI shell); shard_set.cpp indexes the shards (tar_index,
// index_cache), sample_reader.cpp reads a sample's bytes, and the pixels come from the image
// datasets' shared transforms (tp_image_transforms).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cache_dir.h"
#include "image_extensions.h"
#include "image_field.h"
#include "image_pipeline.h"
#include "opencv_threads.h"
#include "sample_label.h"
#include "sample_names.h"
#include "sample_reader.h"
#include "shard_classes.h"
#include "shard_set.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/tp.h"
#include "transform_config.h"

namespace {

using tp::cpp::Failure;
namespace ds = tp::datasets;
namespace wds = tp::webdataset;

/* Schema */

constexpr tp_config_key_t kShardKeys[] = {
    tp::cpp::config_key("shards", TP_CFG_PATH, nullptr,
                        "train shards: a pattern as webdataset writes it, e.g. \"data/train-{000000..000127}.tar\" "
                        "(brace ranges keep their zero padding; lists {a,b}; several braces)"),
    tp::cpp::config_key("val_shards", TP_CFG_PATH, "\"\"", "val split's shards, a pattern like `shards`; \"\" = none"),
    tp::cpp::config_key("test_shards", TP_CFG_PATH, "\"\"",
                        "test split's shards (host eval/predict --split test), a pattern like `shards`; \"\" = none"),
    tp::cpp::config_key("image_extensions", TP_CFG_STRING_ARRAY, ds::kWebdatasetImageExtensionsToml,
                        "member extensions that hold the image; the first one a sample has is decoded (the default "
                        "is image_folder's `extensions`, torchvision's IMG_EXTENSIONS)"),
    tp::cpp::config_key("label_extension", TP_CFG_STRING, "\"cls\"",
                        "member holding the class id: \"cls\" (text integer) or \"json\" (field json_label_key)"),
    tp::cpp::config_key("json_label_key", TP_CFG_STRING, "\"label\"",
                        "with label_extension = \"json\": the object's field that holds the class id"),
    tp::cpp::config_key("class_names", TP_CFG_STRING_ARRAY, "[]",
                        "the classes' names by label id, lent for predictions and exports (torchhost.classes); [] = "
                        "the \"classes\" of the <prefix>-shards.json host shards write put beside the shards, if any"),
    tp::cpp::config_key("sample_names", TP_CFG_STRING, "\"source\"",
                        "how host predict names a sample's row: \"source\" = the image file its json member records "
                        "(host shards write's), else <shard>:<key>; \"shard_key\" = always <shard>:<key>"),
    tp::cpp::config_key("cache", TP_CFG_BOOL, "true",
                        "index each shard once per node (prepare, on local rank 0) and reuse the index while the "
                        "shard's size and time are unchanged"),
    tp::cpp::config_key("cache_dir", TP_CFG_PATH, "\"\"",
                        "where the shard indexes go; \"\" = $XDG_CACHE_HOME/torchhost or ~/.cache/torchhost"),
};
// The transform keys (resize ... max_image_pixels) follow, shared with image_folder.
constexpr auto kKeys = ds::join_keys(kShardKeys, ds::kTransformKeys);

// get_sample is thread-safe: no TP_DESCRIPTOR_SERIAL.
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.torchhost.webdataset", "1.0.0",
    "WebDataset tar shards (<key>.jpg + <key>.cls), decoded and augmented with OpenCV: image, label", kKeys.keys);

/* Config */

/// An extension as members carry it: lower-case, without a leading dot ("JPG" and ".jpg" are "jpg").
std::string member_extension(const std::string& text, const char* key) {
  std::string ext = !text.empty() && text[0] == '.' ? text.substr(1) : text;
  for (char& c : ext)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (ext.empty() || ext.find('/') != std::string::npos)
    throw Failure(TP_ERR_CONFIG, std::string("webdataset: ") + key + " holds '" + text +
                                     "', which is no member extension (write \"jpg\" for members named <key>.jpg)");
  return ext;
}

/// The split's shard pattern: `shards`, `val_shards` or `test_shards`, and that key's name.
std::pair<std::string, const char*> pattern_for(const tp::cpp::ConfigReader& cfg, tp::cpp::Split split) {
  const char* key = split == tp::cpp::Split::kTrain ? "shards" : split == tp::cpp::Split::kVal ? "val_shards"
                                                                                               : "test_shards";
  std::string pattern = cfg.get_string(key);
  // Never another split's shards: serving the training shards as val or test would score the
  // model on what it trained on.
  if (pattern.empty())
    throw Failure(TP_ERR_CONFIG, std::string("webdataset: the ") +
                                     (split == tp::cpp::Split::kVal ? "val" : "test") + " split needs `" + key +
                                     "` (a shard pattern like `shards`)" +
                                     (split == tp::cpp::Split::kVal ? ", or set eval.strategy = \"no\"" : ""));
  return {std::move(pattern), key};
}

/// How create (read) and prepare (read and write) use the index cache. The cache is on by
/// default, so a default directory this user cannot use safely (no home, another owner, writable
/// by others) costs only the cache, with a warning: the shards are indexed in memory instead. A
/// `cache_dir` the config names must be usable (its refusal ends the run, naming it).
wds::IndexCacheUse cache_use(const tp::cpp::DatasetArgs& args, bool writing) {
  wds::IndexCacheUse use;
  if (!args.config.get_bool("cache")) return use;
  use.directory = args.config.get_string("cache_dir");
  if (use.directory.empty()) {
    try {
      use.directory = ds::user_cache_dir(
          {"webdataset", "shard index cache", "a planted index would choose the bytes the dataset reads as samples"});
    } catch (const Failure& e) {
      if (writing)
        args.log(TP_LOG_WARNING, std::string(e.what()) + "; the shards are indexed in memory by every rank instead "
                                                       "(set cache_dir to a directory of your own to keep the index)");
      return {};
    }
  }
  use.read = true;
  use.write = writing;
  if (writing && !args.config.get_string("cache_dir").empty()) {
    if (const ds::WriteRefusal refusal = ds::shared_write_refusal(use.directory); !refusal.reason.empty()) {
      // Another user's directory that only its owner writes is a team's cache as it should be: the
      // split's line says how many indexes came from it.
      args.log(refusal.warn ? TP_LOG_WARNING : TP_LOG_INFO,
               "webdataset: the shard index cache in '" + use.directory + "' is not used: " + refusal.reason);
      use.write = false;
    }
  }
  return use;
}

wds::ShardSet load_split(const tp::cpp::DatasetArgs& args, bool writing, wds::ShardSetStats* stats) {
  const auto [pattern, key] = pattern_for(args.config, args.split);
  return wds::load_shard_set(pattern, key, cache_use(args, writing), stats);
}

std::string log_line(const tp::cpp::DatasetArgs& args, const wds::ShardSetStats& stats, uint64_t samples) {
  return std::string("webdataset (") + args.split_name + "): " + std::to_string(stats.shards) + " shards (" +
         std::to_string(stats.empty) + " empty), " + std::to_string(samples) + " samples; " +
         std::to_string(stats.from_cache) + " indexes from the cache, " + std::to_string(stats.indexed) +
         " shards indexed now";
}

/// Which members of a sample with a given extension set carry its image and label.
struct MemberChoice {
  std::string image;  ///< "" when the sample has none of image_extensions
  bool label = false;
};

/* Instance */

/// One split. Its index is immutable after construction and the shard files are behind their
/// own lock (ShardFiles), so get_sample is const and runs on any number of worker threads;
/// handed-out tensors own their pixels, so nothing outlives it (PLG-13).
class WebDataset {
 public:
  /// The test split reads test_shards like val (no augmentation).
  static constexpr bool kHasTestSplit = true;

  /// Once per node before any rank creates the split (ABI 1.5): with `cache = true`, indexes
  /// every shard whose cached index is missing or stale and writes it, which create then reads.
  static void prepare(const tp::cpp::DatasetArgs& args) {
    if (!args.config.get_bool("cache")) return;
    wds::ShardSetStats stats;
    const wds::ShardSet shards = load_split(args, /*writing=*/true, &stats);
    args.log(TP_LOG_INFO, log_line(args, stats, shards.size()));
  }

  explicit WebDataset(const tp::cpp::DatasetArgs& args)
      : transform_(ds::read_transform(args.config, args.train(), "webdataset")),
        encoded_refusal_(ds::encoded_image_refusal(transform_)),
        label_(read_label_format(args.config)),
        image_extensions_(read_image_extensions(args.config, label_.extension)),
        sample_names_(wds::read_sample_names(args.config.get_string("sample_names"))),
        shards_(load_split(args, /*writing=*/false, &stats_)),
        files_(shards_.shard_paths()),
        classes_(wds::shard_classes(pattern_for(args.config, args.split).first, pattern_for(args.config, args.split).second,
                                    args.config.get_string_array("class_names"))) {
    for (const std::vector<std::string>& members : shards_.extension_sets()) {
      MemberChoice choice;
      for (const std::string& ext : image_extensions_)
        if (choice.image.empty() && std::find(members.begin(), members.end(), ext) != members.end()) choice.image = ext;
      choice.label = std::find(members.begin(), members.end(), label_.extension) != members.end();
      choices_.push_back(std::move(choice));
    }
    args.log(TP_LOG_INFO, log_line(args, stats_, shards_.size()) +
                              (classes_.names.empty() ? std::string()
                                                      : "; " + std::to_string(classes_.names.size()) +
                                                            " class names from " +
                                                            (classes_.source == "class_names"
                                                                 ? std::string("`class_names`")
                                                                 : "'" + classes_.source + "'")));
  }

  uint64_t size() const { return shards_.size(); }

  /// Each shard's end index: the host's sampler reads a shard's samples together (ABI 1.10).
  std::vector<uint64_t> sample_groups() const { return shards_.group_ends(); }

  /// "image" for the host to decode on the device (ABI 1.11), as image_folder declares it.
  std::vector<tp_encoded_image_t> encoded_images() const {
    return {ds::encoded_image_declaration(transform_, encoded_refusal_)};
  }

  /// The classes' names by label id (ABI 1.12), for host predict's `.class` column and host
  /// export's torchhost.classes, as image_folder lends its folders' names: `class_names`, or the
  /// shards' description (shard_classes.h); nothing when neither names them.
  tp::cpp::ClassNames class_names() const { return {"label", classes_.names}; }

  /// Each sample's name (ABI 1.13), host predict's `path` column for a split: the image file its
  /// `json` member records (sample_names.h; host shards write's samples, joined to the folder the
  /// description beside the shards records, shard_classes.h), else `<shard>:<key>`, the
  /// name its bad-sample messages use. Reads each sample with a json member once (its bytes: the
  /// json is the last member host shards write stores), so predict costs one more read of them.
  std::vector<std::string> sample_keys() const {
    std::vector<std::string> keys;
    keys.reserve(shards_.size());
    for (uint64_t index = 0; index < shards_.size(); ++index) {
      const wds::ShardSet::Location at = shards_.locate(index);
      const std::string& shard = shards_.shard_paths()[at.shard];
      std::string name;
      const std::vector<std::string>& members = shards_.extension_sets()[at.members];
      if (sample_names_ == wds::SampleNames::kSource && std::find(members.begin(), members.end(), "json") != members.end()) {
        const wds::SampleSource source{shard, at.key, at.begin};
        const auto read = wds::read_sample_members(files_.read_sample(at.shard, source, at.end, at.to_file_end),
                                                   {"json"}, source);
        if (read[0]) name = wds::recorded_source(*read[0]);
        // Relative to the split's folder, which the description beside the shards records.
        if (!name.empty() && !classes_.source_root.empty() && std::filesystem::path(name).is_relative())
          name = (std::filesystem::path(classes_.source_root) / name).string();
      }
      keys.push_back(name.empty() ? shard + ":" + at.key : std::move(name));
    }
    return keys;
  }

  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    const wds::ShardSet::Location at = shards_.locate(index);
    const std::string& shard = shards_.shard_paths()[at.shard];
    const wds::SampleSource source{shard, at.key, at.begin};
    const MemberChoice& choice = choices_[at.members];
    // Both members are checked from the index before a byte is read: a sample without them
    // fails (data.on_bad_sample) at the cost of a lookup.
    if (choice.image.empty() || !choice.label)
      throw Failure(TP_ERR_IO, "webdataset: " + source.describe() + " has no " +
                                   (choice.image.empty() ? "image member (image_extensions = " + listed(image_extensions_)
                                                         : "label member (label_extension = " + label_.extension) +
                                   "); its members are " + listed(shards_.extension_sets()[at.members]) +
                                   (choice.image.empty() ? image_key_hint(shards_.extension_sets()[at.members]) : ""));
    const std::vector<unsigned char> region = files_.read_sample(at.shard, source, at.end, at.to_file_end);
    auto members = wds::read_sample_members(region, {choice.image, label_.extension}, source);
    if (!members[0] || !members[1])
      throw Failure(TP_ERR_IO, "webdataset: " + source.describe() + ": its bytes lack the member '" + at.key + "." +
                                   (members[0] ? label_.extension : choice.image) +
                                   "' the index recorded; the shard changed after the dataset indexed it");
    const int64_t label = wds::parse_label(*members[1], label_, source.describe() + ", member '" + at.key + "." +
                                                                    label_.extension + "'");
    // The names are lent per class id: a label past them means they name other classes.
    if (!classes_.names.empty() && (label < 0 || static_cast<uint64_t>(label) >= classes_.names.size()))
      throw Failure(TP_ERR_CONFIG, "webdataset: " + source.describe() + " has the label " + std::to_string(label) +
                                       ", but " + (classes_.source == "class_names" ? std::string("`class_names`")
                                                                                      : "'" + classes_.source + "'") +
                                       " names " + std::to_string(classes_.names.size()) +
                                       " classes (ids 0 to " + std::to_string(classes_.names.size() - 1) +
                                       "); give one name per class id the labels use");
    // The per-sample seed drives the train augmentation (PLG-8); val has none to draw.
    const uint64_t seed = transform_.random ? ctx.seed("train augmentation") : ctx.has_seed() ? ctx.raw()->seed : 0;
    const std::string name = shard + ":" + at.key + "." + choice.image;
    if (encoded_refusal_.empty() && ctx.encoded_images()) {
      // The member's bytes and the crop the CPU path would cut (PLG-19); the host decodes them.
      const ds::ImageBox box = ds::encoded_box(*members[0], name, transform_, seed);
      ds::add_encoded_image(out, std::move(*members[0]), box);
    } else if (ds::makes_views(transform_)) {
      ds::add_image_views(out, *members[0], name, transform_, seed);
    } else {
      out.add(ds::make_image_field(ds::transform_image(*members[0], name, transform_, seed), transform_.channels_last));
    }
    out.add("label", std::vector<int64_t>{label}, {});
  }

 private:
  static wds::LabelFormat read_label_format(const tp::cpp::ConfigReader& cfg) {
    wds::LabelFormat format;
    format.extension = member_extension(cfg.get_string("label_extension"), "label_extension");
    const std::string& ext = format.extension;
    format.json = ext == "json" || (ext.size() > 5 && ext.compare(ext.size() - 5, 5, ".json") == 0);
    format.json_key = cfg.get_string("json_label_key");
    return format;
  }

  static std::vector<std::string> read_image_extensions(const tp::cpp::ConfigReader& cfg, const std::string& label) {
    std::vector<std::string> out;
    for (const std::string& text : cfg.get_string_array("image_extensions")) {
      out.push_back(member_extension(text, "image_extensions"));
      if (out.back() == label)
        throw Failure(TP_ERR_CONFIG, "webdataset: '" + label + "' is both in image_extensions and label_extension");
    }
    if (out.empty())
      throw Failure(TP_ERR_CONFIG, "webdataset: image_extensions is empty; name the members that hold the image, "
                                   "e.g. [\"jpg\", \"png\"]");
    return out;
  }

  /// What to set when a sample has no member of image_extensions: the key, and the members that
  /// may be its image (neither the label nor the usual metadata).
  std::string image_key_hint(const std::vector<std::string>& members) const {
    std::vector<std::string> candidates;
    for (const std::string& member : members)
      if (member != label_.extension && member != "cls" && member != "json" && member != "txt")
        candidates.push_back(member);
    if (candidates.empty()) return "; a sample needs its image in a member <key>.<one of image_extensions>";
    // The whole list to paste: setting the key replaces its default, it does not extend it.
    std::string names, setting;
    for (const std::string& ext : candidates) names += (names.empty() ? "\"" : "\", \"") + ext + "\"";
    for (const std::string& ext : image_extensions_) setting += "\"" + ext + "\", ";
    return "; if " + names + " holds the image, add it to `image_extensions` in this dataset's table: image_extensions = [" +
           setting + names + "]";
  }

  static std::string listed(const std::vector<std::string>& extensions) {
    std::string text = "[";
    for (std::size_t i = 0; i < extensions.size(); ++i) text += (i > 0 ? ", " : "") + extensions[i];
    return text + "]";
  }

  ds::TransformOptions transform_;
  std::string encoded_refusal_;  // "": "image" can be handed over encoded (lent by encoded_images())
  wds::LabelFormat label_;
  std::vector<std::string> image_extensions_;
  wds::SampleNames sample_names_;  // how sample_keys() names rows
  wds::ShardSetStats stats_;
  wds::ShardSet shards_;
  wds::ShardFiles files_;
  wds::ShardClasses classes_;          // lent by class_names()
  std::vector<MemberChoice> choices_;  // per extension set of shards_
  ds::OpenCvThreadsPin pin_;          // OpenCV single-threaded while this instance lives
};

}  // namespace

TP_DEFINE_DATASET_PLUGIN("webdataset", WebDataset, kDescriptor)
