// Which (image, mask) file pairs a split holds: root/<image_dir>/<stem><ext> with
// root/<mask_dir>/<stem><mask_suffix>, every image under image_dir or the stems of a list file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tp::segmentation_folder {

/// Where one split's pairs come from (config keys root, image_dir, mask_dir, mask_suffix, list,
/// extensions).
struct PairSource {
  std::string root;
  std::string image_dir = "images";
  std::string mask_dir = "masks";
  std::string mask_suffix = ".png";
  std::string list;                     ///< "" = every image under root/image_dir
  std::vector<std::string> extensions;  ///< image endings, any case, tried in this order for a listed stem
  bool allow_outside_root = false;      ///< a listed stem may be absolute or climb out with '..'
};

/// Paths of the pairs, sample i = (images[i], masks[i]).
struct PairListing {
  std::vector<std::string> images;
  std::vector<std::string> masks;
  std::vector<std::string> loops;  ///< links under image_dir not followed: they loop (folder_walk.h)
};

/// The pairs of `src`. Without a list: every file under root/image_dir (recursively, following
/// directory links, except one that leads back to a folder it is inside: `loops`, relative to
/// image_dir) whose name ends in one of `extensions`, in sorted order of its path relative
/// to image_dir; the stem is that relative path without its extension, so sub-folders are
/// mirrored under mask_dir. With a list: one stem per line in file order (surrounding blanks
/// trimmed; empty lines and lines starting with '#' skipped), the image the first extension that
/// exists. Throws tp::cpp::Failure(TP_ERR_IO) naming the expected mask file when an image has no
/// mask, the stem when a listed image is missing, the directory or list file when it cannot be
/// read, and Failure(TP_ERR_CONFIG) when two images share a stem or the split is empty.
PairListing list_pairs(const PairSource& src);

/// The pairs where `held_out[i] == want`, in order (a val_split part).
PairListing select_pairs(const PairListing& all, const std::vector<bool>& held_out, bool want);

}  // namespace tp::segmentation_folder
