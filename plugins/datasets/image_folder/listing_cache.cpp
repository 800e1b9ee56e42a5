#include "listing_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tp/cpp/guard.h"

namespace tp::image_folder {
namespace {

namespace fs = std::filesystem;
constexpr const char* kMagic = "torchhost image_folder index 1";

// FNV-1a 64: a stable name for (root, extensions); collisions only cost a rescan (the header names
// the root and extensions, which read_listing_cache compares).
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += item + '\t';
  return text;
}

// A directory's modification time in nanoseconds, or -1 when it cannot be read.
int64_t mtime_ns(const std::string& dir) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) return -1;
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
}

}  // namespace

std::string listing_cache_path(const std::string& cache_dir, const std::string& root,
                               const std::vector<std::string>& extensions) {
  std::string dir = cache_dir;
  if (dir.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    dir = xdg != nullptr && *xdg != '\0' ? std::string(xdg) + "/torchhost"
          : home != nullptr             ? std::string(home) + "/.cache/torchhost"
                                        : "/tmp/torchhost-cache";
  }
  const std::string key = fs::absolute(root).lexically_normal().string() + '\n' + joined(extensions);
  char name[64];
  std::snprintf(name, sizeof name, "image_folder-%016llx.index", static_cast<unsigned long long>(fnv1a(key)));
  return (fs::path(dir) / name).string();
}

std::optional<Listing> read_listing_cache(const std::string& path, const std::string& root,
                                          const std::vector<std::string>& extensions) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kMagic) return std::nullopt;
  if (!std::getline(in, line) || line != fs::absolute(root).lexically_normal().string()) return std::nullopt;
  if (!std::getline(in, line) || line != joined(extensions)) return std::nullopt;
  auto count = [&](int64_t* out) {
    return std::getline(in, line) && std::sscanf(line.c_str(), "%lld", reinterpret_cast<long long*>(out)) == 1;
  };
  int64_t dirs = 0, classes = 0, files = 0;
  if (!count(&dirs)) return std::nullopt;
  for (int64_t i = 0; i < dirs; ++i) {
    if (!std::getline(in, line)) return std::nullopt;
    const auto tab = line.find('\t');
    if (tab == std::string::npos || std::to_string(mtime_ns(line.substr(tab + 1))) != line.substr(0, tab))
      return std::nullopt; // a directory changed (or vanished): the listing may be stale
  }
  Listing listing;
  if (!count(&classes)) return std::nullopt;
  for (int64_t i = 0; i < classes && std::getline(in, line); ++i) listing.classes.push_back(line);
  if (static_cast<int64_t>(listing.classes.size()) != classes || !count(&files)) return std::nullopt;
  listing.paths.reserve(static_cast<std::size_t>(files));
  listing.labels.reserve(static_cast<std::size_t>(files));
  for (int64_t i = 0; i < files && std::getline(in, line); ++i) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) return std::nullopt;
    listing.labels.push_back(std::atoll(line.c_str()));
    listing.paths.push_back(line.substr(tab + 1));
  }
  if (static_cast<int64_t>(listing.paths.size()) != files) return std::nullopt; // truncated
  return listing;
}

void write_listing_cache(const std::string& path, const std::string& root, const std::vector<std::string>& extensions,
                         const Listing& listing, const std::vector<std::string>& walked) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  // A name with a newline or tab cannot be stored line by line: such a folder is simply not cached.
  for (const auto* list : {&listing.paths, &listing.classes, &walked})
    for (const std::string& item : *list)
      if (item.find_first_of("\n\t") != std::string::npos) return;
  std::ostringstream text;
  text << kMagic << '\n' << fs::absolute(root).lexically_normal().string() << '\n' << joined(extensions) << '\n';
  text << walked.size() << '\n';
  for (const std::string& dir : walked) text << mtime_ns(dir) << '\t' << dir << '\n';
  text << listing.classes.size() << '\n';
  for (const std::string& name : listing.classes) text << name << '\n';
  text << listing.paths.size() << '\n';
  for (std::size_t i = 0; i < listing.paths.size(); ++i) text << listing.labels[i] << '\t' << listing.paths[i] << '\n';
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text.str();
    out.flush();
    if (!out) {
      fs::remove(temporary, ec);
      throw tp::cpp::Failure(TP_ERR_IO, "image_folder: cannot write the listing cache '" + temporary +
                                            "'; set `cache_dir` to a writable directory or `cache = false`");
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    fs::remove(temporary, ec);
    throw tp::cpp::Failure(TP_ERR_IO, "image_folder: cannot move the listing cache into place at '" + path + "'");
  }
}

}  // namespace tp::image_folder
