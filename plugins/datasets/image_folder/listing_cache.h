// The file listing of an image folder, cached on this node (`cache = true`): the dataset's prepare
// entry (ABI 1.5) scans the folder once per node on local rank 0 and writes the listing here; every
// rank's create then reads it instead of walking a million files again.
//
// Validity: the cache records the modification time of every directory the scan walked (root,
// each class folder and their sub-folders). Adding, removing or renaming a file or folder changes
// its parent directory's time, so create re-stats only those directories (about a thousand for
// ImageNet, milliseconds) and falls back to scanning when any differs. Editing an image in place
// keeps its name, hence its listing: the cache holds names, never pixels.
//
// Trust: a cache file is input, not state. Whoever can write it chooses which files the dataset
// opens and which labels it serves, so a read checks what a scan would guarantee (every label a
// class id, every path and walked directory inside the root, no `..`) and ignores a file that
// fails, as it ignores a stale one; the default directory is per user, created 0700, and refused
// when another user owns it or anyone may write to it (docs/hardening.md, section 11).
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "image_listing.h"

namespace tp::image_folder {

/// The per-user cache directory (cache_dir.h user_cache_dir, its messages naming image_folder's
/// listing cache): $XDG_CACHE_HOME/torchhost when that is an absolute path, else
/// $HOME/.cache/torchhost, else <the user's home from the password database>/.cache/torchhost;
/// never a shared directory such as /tmp. Created with mode 0700 when missing. Throws Failure
/// (TP_ERR_CONFIG) naming it when it is not a directory owned by this user, or others may write
/// to it; (TP_ERR_IO) when it cannot be created or no home directory is known.
std::string default_cache_dir();

/// The cache file for a scan of `root` with `extensions` in `cache_dir` ("" = default_cache_dir(),
/// with its checks): `image_folder-<hash of root, extensions and the scan's rules>.index`; the
/// rules (which folders are classes) are in the name so that a cache an older scan wrote, with
/// other classes, is never read.
std::string listing_cache_path(const std::string& cache_dir, const std::string& root,
                               const std::vector<std::string>& extensions);

/// The cached listing of `root`, or nothing when the file is absent, unreadable, written for
/// another root or extensions, stale (a walked directory's time changed), or fails the checks a
/// scan guarantees (parse_listing_cache).
std::optional<Listing> read_listing_cache(const std::string& path, const std::string& root,
                                          const std::vector<std::string>& extensions);

/// The listing a cache file's text holds, or nothing unless it is a complete cache written for
/// `root` and `extensions` that a scan could have produced: counts are plain non-negative
/// numbers, at least one class and one file, every label in [0, classes), every path and walked
/// directory inside `root` (lexically, with no `..` component), and no walked directory's time
/// changed. Never throws on content (the fuzz target tests/fuzz/listing_cache_fuzzer.cpp).
std::optional<Listing> parse_listing_cache(std::istream& in, const std::string& root,
                                           const std::vector<std::string>& extensions);

/// Writes `listing` (a scan of `root`, `walked` its directories) to `path` atomically: a
/// temporary file renamed into place, so a reader never sees half a cache. Throws Failure
/// (TP_ERR_IO) naming the file when it cannot be written.
void write_listing_cache(const std::string& path, const std::string& root, const std::vector<std::string>& extensions,
                         const Listing& listing, const std::vector<std::string>& walked);

}  // namespace tp::image_folder
