// Fuzz target: image_folder's listing cache read (`cache = true`), the text file that decides
// which files a dataset opens and which labels it serves. Every input must give a listing or
// nothing, never an exception; a listing must be one a scan of the root could produce (every
// label a class id, every path below the root with no `..`); a violation traps, as does a crash
// or a sanitizer report. The root need not exist: the seeds walk no directories, or directories
// whose recorded time (-1) is what a missing one reads as.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>

#include "listing_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const auto listing = tp::image_folder::parse_listing_cache(in, "/fuzz/root", {".png", ".jpg"});
  if (!listing) return 0;
  if (listing->classes.empty() || listing->paths.empty() || listing->paths.size() != listing->labels.size())
    __builtin_trap();
  for (size_t i = 0; i < listing->paths.size(); ++i) {
    const std::string& path = listing->paths[i];
    if (listing->labels[i] < 0 || listing->labels[i] >= static_cast<int64_t>(listing->classes.size())) __builtin_trap();
    // Below the root once normalised ("//fuzz/root/a" names /fuzz/root/a), with no `..` at all.
    if (std::filesystem::path(path).lexically_normal().string().rfind("/fuzz/root/", 0) != 0) __builtin_trap();
    for (const auto& part : std::filesystem::path(path))
      if (part == "..") __builtin_trap();
  }
  return 0;
}
