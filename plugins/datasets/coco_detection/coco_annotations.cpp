#include "coco_annotations.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tp/cpp/guard.h"
#include "regular_input.h"

namespace tp::coco_detection {
namespace {

using json = nlohmann::json;
using tp::cpp::Failure;

enum class Section { kOther, kImages, kAnnotations, kCategories };

const char* section_name(Section s) {
  return s == Section::kImages ? "images" : s == Section::kAnnotations ? "annotations" : "categories";
}

/// An annotation before its ids are resolved.
struct RawAnnotation {
  CocoObject object;
  int64_t id = 0;
  bool has_id = false;  ///< the entry has an `id` (it is optional here)
  int64_t image_id = 0;
  int64_t category_id = 0;
  std::size_t index = 0;  ///< position in the file's `annotations` array
};

/// The parse callback's state: which top-level array is being read and what has been kept of it.
/// nlohmann's callback parser builds one entry of `images` / `annotations` / `categories` at a
/// time (with only the keys below), hands it over when it ends and is told to discard it, so the
/// document never exists whole; polygons and RLE counts are skipped without building values.
class Reader {
 public:
  /// Deeper than any COCO file nests (5: a polygon's points), shallow enough for any recursion.
  static constexpr int kMaxDepth = 16;

  Reader(std::string path, const char* key, bool drop_negative_boxes)
      : path_(std::move(path)), key_(key), drop_negative_boxes_(drop_negative_boxes) {}

  /// `parse_event_t` handler; depth 1 is the top-level object's members, 2 an array's entries,
  /// 3 an entry's members, 4 a bbox's numbers.
  bool on_event(int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    // A COCO file nests 5 levels at most (a polygon's points); 100,000 nested `[` in a bbox once
    // built a value whose dump() in the error message overflowed the stack. Refused as it starts.
    if (depth > kMaxDepth && (event == E::array_start || event == E::object_start))
      fail("it nests arrays or objects deeper than " + std::to_string(kMaxDepth) + " levels" +
           (section_ != Section::kOther && in_array_ ? " at " + where() : std::string()) +
           "; a COCO instances file nests 5 at most. Is it damaged?");
    if (depth == 0) {
      if (event == E::array_start || event == E::value)
        fail("its top level is not an object; a COCO instances file is {\"images\": [...], \"annotations\": [...], "
             "\"categories\": [...]}");
      return true;
    }
    if (depth == 1) {
      if (event == E::key) {
        section_ = section_of(parsed.get_ref<const std::string&>());
        in_array_ = false;
        return section_ != Section::kOther;
      }
      if (section_ == Section::kOther) return event != E::object_start && event != E::array_start;
      if (event == E::array_start) {
        in_array_ = true;
        seen_[static_cast<int>(section_)] = true;
        index_ = 0;
        return true;
      }
      if (event == E::object_start || event == E::value)
        fail(std::string("`") + section_name(section_) + "` is not an array");
      return true;
    }
    if (!in_array_) return false;
    if (depth == 2) {
      if (event == E::object_start) return true;
      if (event == E::object_end) {
        take(parsed);
        ++index_;
        return false;  // converted: drop it from the document
      }
      if (event == E::array_start || event == E::value)
        fail(where() + " is not an object");
      return true;
    }
    if (depth == 3 && event == E::key) {
      field_ = parsed.get_ref<const std::string&>();
      return wanted(field_);
    }
    // Below an entry's members only a bbox is kept (whole, so a malformed one is reported as
    // written); any other nested array or object (a polygon, RLE counts) is refused at its start
    // so its numbers are never built.
    if (depth >= 4 && (event == E::array_start || event == E::object_start)) {
      const bool bbox = section_ == Section::kAnnotations && field_ == "bbox";
      if (bbox && depth > 4) fail(where() + "'s `bbox` holds an array or an object; a bbox is [x, y, width, height]");
      return bbox;
    }
    return true;
  }

  /// The split, ids resolved; throws naming what is missing or inconsistent.
  CocoSplit finish(const CocoReadOptions& options) {
    // `annotations` may be absent: COCO's test-dev image lists (image_info_test-dev2017.json)
    // have none, and predicting on them is what a test split is for.
    for (Section s : {Section::kImages, Section::kCategories})
      if (!seen_[static_cast<int>(s)])
        fail(std::string("it has no `") + section_name(s) +
             "` array; is it an instances file (instances_*.json or image_info_*.json), not a captions file?");
    CocoSplit split;
    std::stable_sort(categories_.begin(), categories_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [id, name] : categories_) {
      split.category_ids.push_back(id);
      split.category_names.push_back(std::move(name));
    }
    const auto dup_cat = std::adjacent_find(split.category_ids.begin(), split.category_ids.end());
    if (dup_cat != split.category_ids.end()) fail("two `categories` have the id " + std::to_string(*dup_cat));
    std::unordered_map<int64_t, int64_t> label_of;
    for (std::size_t k = 0; k < split.category_ids.size(); ++k)
      label_of.emplace(split.category_ids[k], options.contiguous_labels ? static_cast<int64_t>(k) : split.category_ids[k]);

    std::stable_sort(images_.begin(), images_.end(), [](const CocoImage& a, const CocoImage& b) { return a.id < b.id; });
    std::unordered_map<int64_t, std::size_t> image_at;
    image_at.reserve(images_.size());
    for (std::size_t i = 0; i < images_.size(); ++i)
      if (!image_at.emplace(images_[i].id, i).second) fail("two `images` have the id " + std::to_string(images_[i].id));

    warn_about_shared_ids(split);
    if (dropped_ > 0)
      split.warnings.push_back("coco_detection: '" + path_ + "' (key `" + key_ + "`): dropped " + std::to_string(dropped_) +
                               " annotation(s) whose bbox has a negative width or height (drop_negative_boxes = true), "
                               "the first " + first_dropped_);

    // Counting sort of the annotations by image, stable: file order within an image, as
    // pycocotools' imgToAnns (and so torchvision) lists them.
    std::vector<uint32_t> count(images_.size() + 1, 0);
    std::vector<std::size_t> owner(annotations_.size());
    for (std::size_t a = 0; a < annotations_.size(); ++a) {
      RawAnnotation& r = annotations_[a];
      const auto image = image_at.find(r.image_id);
      if (image == image_at.end())
        fail(annotation(r) + " has image_id " + std::to_string(r.image_id) +
             ", which no entry of `images` has; are the image list and the annotations from the same file?");
      const auto label = label_of.find(r.category_id);
      if (label == label_of.end())
        fail(annotation(r) + " has category_id " + std::to_string(r.category_id) +
             ", which no entry of `categories` has; add the category or remove the annotation");
      if (options.num_classes > 0 && label->second >= options.num_classes)
        fail(annotation(r) + " has category_id " + std::to_string(r.category_id) + ", label " +
             std::to_string(label->second) + ", not below num_classes = " + std::to_string(options.num_classes) +
             ": the model would train it as background. Give the model and this dataset num_classes above every "
             "label (COCO's ids: 91), or set contiguous_labels = true (labels 0.." +
             std::to_string(split.category_ids.size() - 1) + ")");
      r.object.label = label->second;
      owner[a] = image->second;
      ++count[image->second + 1];
    }
    for (std::size_t i = 0; i < images_.size(); ++i) {
      images_[i].first_object = count[i];
      images_[i].object_count = count[i + 1];
      count[i + 1] += count[i];
    }
    split.objects.resize(annotations_.size());
    for (std::size_t a = 0; a < annotations_.size(); ++a) split.objects[count[owner[a]]++] = annotations_[a].object;
    annotations_ = {};
    split.images = std::move(images_);
    if (options.skip_empty) {
      split.images.erase(std::remove_if(split.images.begin(), split.images.end(),
                                        [&](const CocoImage& image) { return !keeps_image(split, image); }),
                         split.images.end());
      if (split.images.empty())
        throw Failure(TP_ERR_CONFIG, "coco_detection: no image of '" + path_ + "' (key `" + key_ +
                                         "`) has a non-crowd box wider and taller than 1 pixel, so skip_empty "
                                         "leaves nothing to train on; check the file or set skip_empty = false");
    }
    return split;
  }

 private:
  static Section section_of(const std::string& name) {
    if (name == "images") return Section::kImages;
    if (name == "annotations") return Section::kAnnotations;
    if (name == "categories") return Section::kCategories;
    return Section::kOther;
  }

  bool wanted(const std::string& field) const {
    switch (section_) {
      case Section::kImages: return field == "id" || field == "file_name" || field == "width" || field == "height";
      case Section::kAnnotations:
        return field == "id" || field == "image_id" || field == "category_id" || field == "bbox" ||
               field == "iscrowd" || field == "area";
      case Section::kCategories: return field == "id" || field == "name";
      case Section::kOther: return false;
    }
    return false;
  }

  /// Annotations sharing an id are kept, unlike images or categories sharing one (refused: which
  /// file, which label?): an annotation's id plays no part here and torchvision's CocoDetection
  /// trains on both (pycocotools' imgToAnns lists both). But pycocotools' COCO keeps only the
  /// later in its `anns` dict, so COCOeval evaluates that one twice in place of both: a trial's
  /// file with one shared id scored 0.1962 there and 0.2044 here (= the file without the clash).
  void warn_about_shared_ids(CocoSplit& split) const {
    std::vector<std::pair<int64_t, std::size_t>> ids;  // (id, array index)
    for (const RawAnnotation& r : annotations_)
      if (r.has_id) ids.emplace_back(r.id, r.index);
    std::sort(ids.begin(), ids.end());
    std::size_t shared = 0, later = 0;  // later: the first clash's later entry in `ids`
    for (std::size_t k = 1; k < ids.size(); ++k)
      if (ids[k].first == ids[k - 1].first && shared++ == 0) later = k;
    if (shared == 0) return;
    split.warnings.push_back(
        "coco_detection: '" + path_ + "' (key `" + key_ + "`): annotations[" + std::to_string(ids[later - 1].second) +
        "] and annotations[" + std::to_string(ids[later].second) + "] have the same id " + std::to_string(ids[later].first) +
        (shared > 1 ? " (" + std::to_string(shared - 1) + " more annotations share an id with an earlier one)" : "") +
        ". torchhost keeps both, as torchvision's CocoDetection does, but pycocotools' COCO keeps only the later "
        "under that id and COCOeval then scores it twice in place of both, so its mAP on this file differs from "
        "coco_map's; give each annotation its own id");
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Failure(TP_ERR_IO, "coco_detection: '" + path_ + "' (key `" + key_ + "`): " + what);
  }

  std::string where() const { return std::string(section_name(section_)) + "[" + std::to_string(index_) + "]"; }
  std::string annotation(const RawAnnotation& r) const {
    return "annotations[" + std::to_string(r.index) + "] (id " + std::to_string(r.id) + ")";
  }

  /// The integer member `name` of `entry`; `fallback` when absent and allowed, else a failure.
  int64_t integer(const json& entry, const char* name, bool required, int64_t fallback = 0) const {
    const auto it = entry.find(name);
    if (it == entry.end()) {
      if (required) fail(where() + " has no `" + name + "`");
      return fallback;
    }
    if (!it->is_number_integer()) fail(where() + "'s `" + name + "` is not an integer: " + it->dump());
    return it->get<int64_t>();
  }

  void take(const json& entry) {
    switch (section_) {
      case Section::kImages: {
        CocoImage image;
        image.id = integer(entry, "id", true);
        const auto name = entry.find("file_name");
        if (name == entry.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
          fail(where() + " (id " + std::to_string(image.id) + ") has no `file_name` string");
        image.file_name = name->get<std::string>();
        image.width = static_cast<int>(std::clamp<int64_t>(integer(entry, "width", false), 0, 1 << 30));
        image.height = static_cast<int>(std::clamp<int64_t>(integer(entry, "height", false), 0, 1 << 30));
        images_.push_back(std::move(image));
        break;
      }
      case Section::kAnnotations: {
        RawAnnotation r;
        r.index = index_;
        r.id = integer(entry, "id", false, -1);
        r.has_id = entry.contains("id");
        r.image_id = integer(entry, "image_id", true);
        r.category_id = integer(entry, "category_id", true);
        const auto bbox = entry.find("bbox");
        if (bbox == entry.end() || !bbox->is_array() || bbox->size() != 4 ||
            !std::all_of(bbox->begin(), bbox->end(), [](const json& v) { return v.is_number(); }))
          fail(annotation(r) + " has no `bbox` of 4 numbers [x, y, width, height]" +
               (bbox == entry.end() ? std::string() : ": " + bbox->dump()));
        r.object.x = (*bbox)[0].get<float>();
        r.object.y = (*bbox)[1].get<float>();
        r.object.w = (*bbox)[2].get<float>();
        r.object.h = (*bbox)[3].get<float>();
        if ((r.object.w < 0.f || r.object.h < 0.f) && drop_negative_boxes_) {
          if (dropped_++ == 0) first_dropped_ = annotation(r) + " " + bbox->dump();
          break;
        }
        if (r.object.w < 0.f || r.object.h < 0.f)
          fail(annotation(r) + " has a bbox of negative size " + bbox->dump() +
               " ([x, y, width, height]); fix or remove the annotation, or set drop_negative_boxes = true to drop "
               "such annotations (torchvision drops them too)");
        const auto crowd = entry.find("iscrowd");  // pycocotools also takes true / false
        r.object.crowd = crowd != entry.end() && crowd->is_boolean() ? crowd->get<bool>()
                                                                      : integer(entry, "iscrowd", false, 0) != 0;
        const auto area = entry.find("area");
        if (area != entry.end() && !area->is_number()) fail(annotation(r) + "'s `area` is not a number: " + area->dump());
        r.object.area = area != entry.end() ? area->get<float>() : r.object.w * r.object.h;
        annotations_.push_back(r);
        break;
      }
      case Section::kCategories: {
        const auto name = entry.find("name");  // optional: only contiguous labels lend names
        categories_.emplace_back(integer(entry, "id", true),
                                 name != entry.end() && name->is_string() ? name->get<std::string>() : std::string());
        break;
      }
      case Section::kOther: break;
    }
  }

  std::string path_;
  const char* key_;
  bool drop_negative_boxes_;
  std::size_t dropped_ = 0;    ///< annotations dropped for a negative-size bbox
  std::string first_dropped_;  ///< the first of them, for the warning
  Section section_ = Section::kOther;
  bool in_array_ = false;      // section_'s value is the array being read
  bool seen_[4] = {};          // by Section
  std::size_t index_ = 0;      // entry index within the current array
  std::string field_;          // the member being read in an entry
  std::vector<CocoImage> images_;
  std::vector<RawAnnotation> annotations_;
  std::vector<std::pair<int64_t, std::string>> categories_;  // id, name ("" when none)
};

/// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string plain(const std::exception& e) {
  const std::string what = e.what();
  const std::size_t tag = what.find("] ");
  return tag == std::string::npos ? what : what.substr(tag + 2);
}

}  // namespace

bool keeps_image(const CocoSplit& split, const CocoImage& image) {
  for (uint32_t k = 0; k < image.object_count; ++k) {
    const CocoObject& o = split.objects[image.first_object + k];
    if (!o.crowd && o.w > 1.f && o.h > 1.f) return true;
  }
  return false;
}

CocoSplit read_coco(const std::string& path, const char* key, const CocoReadOptions& options) {
  // Parsed straight from the file through a 1 MiB stdio buffer: as fast as parsing a copy in
  // memory (6.7 s for a 445 MB COCO-sized file here) without holding the file's size in RAM
  // (peak 167 MB instead of 600 MB).
  std::vector<char> buffer(std::size_t{1} << 20);
  datasets::refuse_special_input(path, "coco_detection", std::string("key `") + key + "`");
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    throw Failure(TP_ERR_IO, "coco_detection: cannot open '" + path + "': " + std::strerror(errno) + " (key `" + key +
                                 "`); set it to a COCO instances file such as annotations/instances_train2017.json");
  std::setvbuf(file.get(), buffer.data(), _IOFBF, buffer.size());
  Reader reader(path, key, options.drop_negative_boxes);
  try {
    // What is left of the document is its skeleton: every entry was converted and discarded.
    const json skeleton = json::parse(file.get(), [&reader](int depth, json::parse_event_t event, json& parsed) {
      return reader.on_event(depth, event, parsed);
    });
  } catch (const json::parse_error& e) {
    if (std::ferror(file.get()))
      throw Failure(TP_ERR_IO, "coco_detection: cannot read '" + path + "' (key `" + key + "`): " + std::strerror(errno));
    throw Failure(TP_ERR_IO, "coco_detection: '" + path + "' (key `" + key + "`) is not valid JSON: " + plain(e) +
                                 "; fix the file or download it again");
  } catch (const json::exception& e) {
    throw Failure(TP_ERR_IO, "coco_detection: '" + path + "' (key `" + key + "`) cannot be read as COCO: " + plain(e));
  }
  return reader.finish(options);
}

}  // namespace tp::coco_detection
