// The file listing of an image folder, cached on this node (`cache = true`): the dataset's prepare
// entry (ABI 1.5) scans the folder once per node on local rank 0 and writes the listing here; every
// rank's create then reads it instead of walking a million files again.
//
// Validity: the cache records the modification time of every directory the scan walked (root,
// each class folder and their sub-folders). Adding, removing or renaming a file or folder changes
// its parent directory's time, so create re-stats only those directories (about a thousand for
// ImageNet, milliseconds) and falls back to scanning when any differs. Editing an image in place
// keeps its name, hence its listing: the cache holds names, never pixels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "image_listing.h"

namespace tp::image_folder {

/// The cache file for a scan of `root` with `extensions` in `cache_dir` ("" = $XDG_CACHE_HOME/
/// torchhost, else $HOME/.cache/torchhost): `image_folder-<hash of root and extensions>.index`.
std::string listing_cache_path(const std::string& cache_dir, const std::string& root,
                               const std::vector<std::string>& extensions);

/// The cached listing of `root`, or nothing when the file is absent, unreadable, written for
/// another root or extensions, or stale (a walked directory's time changed).
std::optional<Listing> read_listing_cache(const std::string& path, const std::string& root,
                                          const std::vector<std::string>& extensions);

/// Writes `listing` (a scan of `root`, `walked` its directories) to `path` atomically: a
/// temporary file renamed into place, so a reader never sees half a cache. Throws Failure
/// (TP_ERR_IO) naming the file when it cannot be written.
void write_listing_cache(const std::string& path, const std::string& root, const std::vector<std::string>& extensions,
                         const Listing& listing, const std::vector<std::string>& walked);

}  // namespace tp::image_folder
