#include "pair_listing.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "folder_walk.h"
#include "listing_text.h"
#include "pixel_io.h"
#include "tp/cpp/guard.h"
#include "regular_input.h"

namespace tp::segmentation_folder {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

/// Relative paths (generic form) of the images under `dir`, sorted; the links not followed
/// because they loop (folder_walk.h) go into `loops`, relative to `dir`.
std::vector<std::string> scan_images(const fs::path& dir, const std::vector<std::string>& extensions,
                                     std::vector<std::string>* loops) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Failure(TP_ERR_IO, "segmentation_folder: '" + dir.string() + "' is not a directory (the images of a split "
                             "are root/<image_dir>; see `root`, `image_dir`)");
  const datasets::FolderWalk walk = datasets::walk_folder(dir, "segmentation_folder");
  std::vector<std::string> found;
  for (const fs::path& file : walk.files)
    if (datasets::has_extension(file.filename().string(), extensions))
      found.push_back(file.lexically_relative(dir).generic_string());
  std::sort(found.begin(), found.end());
  *loops = walk.loops;
  return found;
}

std::vector<std::string> read_stems(const std::string& list) {
  datasets::refuse_special_input(list, "segmentation_folder", "the list file");
  std::ifstream in(list);
  if (!in) throw Failure(TP_ERR_IO, "segmentation_folder: cannot open the list file '" + list + "'");
  std::vector<std::string> stems;
  std::string line;
  while (std::getline(in, line)) {
    const std::string stem = datasets::trim(line);
    if (!stem.empty() && stem[0] != '#') stems.push_back(stem);
  }
  return stems;
}

}  // namespace

PairListing list_pairs(const PairSource& src) {
  const fs::path image_root = fs::path(src.root) / src.image_dir;
  const fs::path mask_root = fs::path(src.root) / src.mask_dir;
  PairListing out;
  std::set<std::string> stems;
  const auto add = [&](const std::string& stem, const fs::path& image) {
    if (!stems.insert(stem).second)
      throw Failure(TP_ERR_CONFIG, "segmentation_folder: two images in '" + image_root.string() + "' have the stem '" +
                                       stem + "' (they would share one mask); rename or remove one");
    const fs::path mask = mask_root / (stem + src.mask_suffix);
    if (!is_file(mask))
      throw Failure(TP_ERR_IO, "segmentation_folder: no mask for image '" + image.string() + "': '" + mask.string() +
                                   "' does not exist (a mask is <mask_dir>/<stem><mask_suffix>)");
    out.images.push_back(image.string());
    out.masks.push_back(mask.string());
  };
  if (src.list.empty()) {
    for (const std::string& rel : scan_images(image_root, src.extensions, &out.loops)) {
      const std::string stem = fs::path(rel).replace_extension().generic_string();
      add(stem, image_root / rel);
    }
  } else {
    for (const std::string& stem : read_stems(src.list)) {
      // A stem names a file inside the image and mask directories (issue 41, item 11).
      if (const std::string why = datasets::escapes_root(stem); !why.empty() && !src.allow_outside_root)
        throw Failure(TP_ERR_CONFIG, "segmentation_folder: '" + src.list + "' lists '" + stem + "', which " + why +
                                         " of '" + image_root.string() + "' and '" + mask_root.string() +
                                         "'; list stems inside them, or set allow_outside_root = true if the list is "
                                         "meant to reach files elsewhere");
      fs::path image;
      for (const std::string& e : src.extensions) {
        if (is_file(image_root / (stem + e))) {
          image = image_root / (stem + e);
          break;
        }
      }
      if (image.empty())
        throw Failure(TP_ERR_IO, "segmentation_folder: '" + src.list + "' lists '" + stem + "', but no " +
                                     (image_root / stem).string() + ".<ext> exists for an ending in `extensions`");
      add(stem, image);
    }
  }
  if (out.images.empty())
    throw Failure(TP_ERR_CONFIG, "segmentation_folder: no images in " +
                                     (src.list.empty() ? "'" + image_root.string() + "'" : "the list '" + src.list + "'"));
  return out;
}

PairListing select_pairs(const PairListing& all, const std::vector<bool>& held_out, bool want) {
  PairListing out;
  out.loops = all.loops;
  for (std::size_t i = 0; i < all.images.size(); ++i) {
    if (held_out[i] != want) continue;
    out.images.push_back(all.images[i]);
    out.masks.push_back(all.masks[i]);
  }
  return out;
}

}  // namespace tp::segmentation_folder
