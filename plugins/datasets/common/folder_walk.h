// Walking a folder tree for its files as torchvision's `os.walk(root, followlinks=True)` does
// (links to directories followed, entries of any other kind left out), without going round a link
// loop: shared by image_folder's class folders and segmentation_folder's image directory
// (tp_folder_walk: no OpenCV, no LibTorch; `host shards write` links it through image_folder's
// listing).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tp::datasets {

/// What walk_folder found under a directory.
struct FolderWalk {
  std::vector<std::filesystem::path> files;  ///< regular files, also through links, in walk order (callers sort)
  std::vector<std::string> directories;      ///< every directory entered, the walked one first
  std::vector<std::string> loops;            ///< links not entered (see walk_folder), relative to the walked directory
};

/// The regular files under `dir`, following links to directories, except a link that leads back
/// to a directory the walk is inside (`up -> ..`, `here -> .`, or two links that lead into each
/// other's folders): it is not entered, and its path relative to `dir` (generic form, "loop/up")
/// goes into `loops`. os.walk would go round such a link until the path holds too many links for
/// the OS (about 40 rounds), listing the same files again each round. An entry whose type cannot
/// be read (a dangling link, a link to itself, a chain of links too long) is left out, as a FIFO
/// or a socket is. Throws tp::cpp::Failure(TP_ERR_IO) naming `component` and the directory when
/// `dir` or a directory under it cannot be read (permissions, I/O). Costs one realpath per
/// directory (not per file).
FolderWalk walk_folder(const std::filesystem::path& dir, const char* component);

}  // namespace tp::datasets
