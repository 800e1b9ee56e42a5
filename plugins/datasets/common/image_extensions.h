// The image file endings the image datasets take by default: torchvision's IMG_EXTENSIONS
// (torchvision/datasets/folder.py), so image_folder lists the files torchvision's ImageFolder
// lists, and webdataset's `image_extensions` take every member `host shards write` stores from
// such a folder (a shard holding a .bmp the reader's default left out failed every such sample,
// data trial F4). One list, two spellings: image_folder's `extensions` match the end of a file
// name (".jpg"), webdataset's name a member's extension ("jpg"). The schema defaults are TOML
// text, so both texts are written out below and checked against the list at compile time.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tp::datasets {

/// torchvision's IMG_EXTENSIONS, without the dot, in its order. Every one decodes through
/// OpenCV's imgcodecs here (JPEG, PNG, netpbm, BMP, TIFF, WebP), to PIL's pixels
/// (docs/datasets.md, "image_folder").
inline constexpr std::array<std::string_view, 9> kImageExtensions = {"jpg", "jpeg", "png", "ppm", "bmp",
                                                                     "pgm", "tif", "tiff", "webp"};

/// image_folder's `extensions` default, TOML text: kImageExtensions with a dot.
inline constexpr const char* kImageFolderExtensionsToml =
    "[\".jpg\", \".jpeg\", \".png\", \".ppm\", \".bmp\", \".pgm\", \".tif\", \".tiff\", \".webp\"]";

/// webdataset's `image_extensions` default, TOML text: kImageExtensions as they are.
inline constexpr const char* kWebdatasetImageExtensionsToml =
    "[\"jpg\", \"jpeg\", \"png\", \"ppm\", \"bmp\", \"pgm\", \"tif\", \"tiff\", \"webp\"]";

/// Whether `toml` is exactly kImageExtensions written as a TOML array of strings, each after
/// `dot` (".": image_folder's spelling; "": webdataset's), separated by ", ".
constexpr bool spells_image_extensions(std::string_view toml, std::string_view dot) {
  std::string_view rest = toml;
  const auto take = [&rest](std::string_view text) {
    if (rest.substr(0, text.size()) != text) return false;
    rest.remove_prefix(text.size());
    return true;
  };
  if (!take("[")) return false;
  for (std::size_t i = 0; i < kImageExtensions.size(); ++i)
    if (!(take(i == 0 ? "" : ", ") && take("\"") && take(dot) && take(kImageExtensions[i]) && take("\""))) return false;
  return take("]") && rest.empty();
}
static_assert(spells_image_extensions(kImageFolderExtensionsToml, "."));
static_assert(spells_image_extensions(kWebdatasetImageExtensionsToml, ""));

/// kImageExtensions with a leading dot (".jpg", ...): image_folder's `extensions` default as values.
inline std::vector<std::string> default_image_endings() {
  std::vector<std::string> out;
  for (const std::string_view ext : kImageExtensions) out.push_back("." + std::string(ext));
  return out;
}

}  // namespace tp::datasets
