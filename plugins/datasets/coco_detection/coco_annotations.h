// A COCO instances file (instances_train2017.json and its kind) read once into what samples need:
// per image its id, file name and declared size, per object its box, class, crowd flag and area,
// per category its id and name.
// Polygons, RLE masks, captions, licenses and the rest are skipped while parsing, never stored,
// so COCO 2017 train (448 MB of JSON, 118k images, 860k objects) ends up as ~35 MB of arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tp::coco_detection {

/// One annotation as the file gives it, in the pixels of the original image. Numbers are
/// float32, as torchvision reads them (torch.as_tensor(..., dtype=torch.float32)).
struct CocoObject {
  float x = 0.f;  ///< bbox [x, y, w, h]: top-left corner, width, height (w, h >= 0)
  float y = 0.f;
  float w = 0.f;
  float h = 0.f;
  float area = 0.f;   ///< the annotation's `area` (its mask's; w * h when absent)
  int64_t label = 0;  ///< category_id, or its rank among the category ids (contiguous_labels)
  bool crowd = false; ///< iscrowd == 1 (absent: 0)
};

/// One entry of `images`, with its objects.
struct CocoImage {
  int64_t id = 0;
  std::string file_name;  ///< relative to the split's image directory
  int width = 0;          ///< as declared by the file; 0 when absent
  int height = 0;
  uint32_t first_object = 0;  ///< its objects are objects[first_object, first_object + object_count)
  uint32_t object_count = 0;
};

/// A whole split.
struct CocoSplit {
  std::vector<CocoImage> images;    ///< ascending id (torchvision's CocoDetection order)
  std::vector<CocoObject> objects;  ///< grouped by image in `images` order; file order within one
  std::vector<int64_t> category_ids;  ///< ascending
  std::vector<std::string> category_names;  ///< in category_ids' order; "" where the entry has no `name` string
  /// What the file holds that this reader reads fine but other tools read otherwise, one
  /// paragraph each (naming the file and key), for the dataset to log as warnings.
  std::vector<std::string> warnings;
};

/// How labels are written and which images stay.
struct CocoReadOptions {
  bool contiguous_labels = false;  ///< label = rank of category_id among category_ids, else the id
  bool skip_empty = false;         ///< keep only images with a usable non-crowd box (keeps_image)
  int64_t num_classes = 0;         ///< > 0: every annotation's label must be below it; 0: unchecked
  /// An annotation whose bbox has a negative width or height is dropped (counted in a warning);
  /// torchvision's ConvertCocoPolysToMask drops those too. false: the file is refused.
  bool drop_negative_boxes = false;
};

/// Reads the instances JSON at `path`. `key` is the config key that named it (for messages).
/// Throws tp::cpp::Failure(TP_ERR_IO) with a message naming the file, the key and the fix when
/// the file cannot be read, is not JSON (with line and column), lacks the `images` or
/// `categories` array (`annotations` may be absent, as in COCO's test-dev image lists), has an entry of the wrong shape (naming its array index and id), two
/// images or categories with one id, an annotation whose image_id or category_id no entry has,
/// or a bbox with negative width or height (unless drop_negative_boxes); Failure(TP_ERR_CONFIG)
/// when skip_empty leaves no image.
/// Annotations sharing an id are kept (ids play no part here) with a note in `warnings`.
CocoSplit read_coco(const std::string& path, const char* key, const CocoReadOptions& options);

/// torchvision's _coco_remove_images_without_annotations test, restricted to non-crowd objects:
/// true when some non-crowd object has w > 1 and h > 1 (torchvision's "not empty" box).
bool keeps_image(const CocoSplit& split, const CocoImage& image);

}  // namespace tp::coco_detection
