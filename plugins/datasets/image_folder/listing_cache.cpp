#include "listing_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cache_dir.h"
#include "exclusive_file.h"
#include "stable_hash.h"
#include "tp/cpp/guard.h"

namespace tp::image_folder {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;
constexpr const char* kMagic = "torchhost image_folder index 1";
// Which scan wrote a cache (image_listing.h scan_folder): changed with the rules that choose the
// classes or files, so a cache of the old rules gets another file name and is never read.
constexpr const char* kScanRules = "hidden folders skipped";

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

// A count line: digits only (no sign, no spaces), at most 18 of them. sscanf("%lld") took "-5"
// and "12abc", and a huge count went straight into vector::reserve.
bool parse_count(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoll(text);
  return true;
}

// Whether `path` lies inside `root` as a scan's paths do (root/<class>/...): below root lexically,
// with no `..` after it. Compared as written, without resolving links: the scan follows links
// inside the root too, and a root given as "../data" is fine; what this stops is a planted cache
// pointing the dataset at /etc/shadow or ../another_dataset.
bool inside_root(const std::string& path, const fs::path& root, bool root_itself) {
  const fs::path relative = fs::path(path).lexically_relative(root);
  if (relative.empty()) return false;  // absolute against relative, or another root name
  if (relative == ".") return root_itself;
  for (const fs::path& part : relative)
    if (part == "..") return false;
  return true;
}

// The class folder a scan takes a file's label from: the first part of its path below `root`.
std::string class_folder(const std::string& path, const fs::path& root) {
  const fs::path relative = fs::path(path).lexically_relative(root);
  return relative.empty() ? std::string() : relative.begin()->string();
}

}  // namespace

std::string default_cache_dir() {
  return datasets::user_cache_dir({"image_folder", "listing cache",
                         "a planted listing would choose the files and labels the dataset serves"});
}

std::string listing_cache_path(const std::string& cache_dir, const std::string& root,
                               const std::vector<std::string>& extensions) {
  const std::string dir = cache_dir.empty() ? default_cache_dir() : cache_dir;
  // The scan's rules are part of the key: a cache written before hidden folders were left out of
  // the classes (data trial F9) holds them as classes, and must not be read for a listing that
  // has none.
  const std::string key = fs::absolute(root).lexically_normal().string() + '\n' + joined(extensions) + '\n' + kScanRules;
  char name[64];
  std::snprintf(name, sizeof name, "image_folder-%016llx.index", static_cast<unsigned long long>(datasets::fnv1a_64(key)));
  return (fs::path(dir) / name).string();
}

std::optional<Listing> read_listing_cache(const std::string& path, const std::string& root,
                                          const std::vector<std::string>& extensions) {
  // Never through a planted link, never blocking on a planted FIFO, never more than a listing of
  // ten million images takes, never from a directory or file others can write: the directory may
  // be a team's, and its files are untrusted.
  constexpr std::size_t kMaxListingBytes = std::size_t{2} << 30;
  std::optional<std::string> text = datasets::read_cache_file(path, kMaxListingBytes);
  if (!text) return std::nullopt;
  std::istringstream in(std::move(*text));
  return parse_listing_cache(in, root, extensions);
}

std::optional<Listing> parse_listing_cache(std::istream& in, const std::string& root,
                                           const std::vector<std::string>& extensions) {
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return std::nullopt;
  if (!std::getline(in, line) || line != fs::absolute(root).lexically_normal().string()) return std::nullopt;
  if (!std::getline(in, line) || line != joined(extensions)) return std::nullopt;
  auto count = [&](int64_t* out) { return std::getline(in, line) && parse_count(line, out); };
  int64_t dirs = 0, classes = 0, files = 0;
  if (!count(&dirs)) return std::nullopt;
  for (int64_t i = 0; i < dirs; ++i) {
    if (!std::getline(in, line)) return std::nullopt;
    const auto tab = line.find('\t');
    if (tab == std::string::npos || !inside_root(line.substr(tab + 1), root, /*root_itself=*/true) ||
        std::to_string(mtime_ns(line.substr(tab + 1))) != line.substr(0, tab))
      return std::nullopt;  // a directory changed (or vanished): the listing may be stale
  }
  Listing listing;
  if (!count(&classes) || classes == 0) return std::nullopt;
  for (int64_t i = 0; i < classes && std::getline(in, line); ++i) listing.classes.push_back(line);
  if (static_cast<int64_t>(listing.classes.size()) != classes || !count(&files) || files == 0) return std::nullopt;
  // The count is the file's claim: reserve no more than a cache of a million images needs.
  listing.paths.reserve(static_cast<std::size_t>(std::min<int64_t>(files, 1 << 20)));
  listing.labels.reserve(listing.paths.capacity());
  for (int64_t i = 0; i < files && std::getline(in, line); ++i) {
    const auto tab = line.find('\t');
    int64_t label = 0;
    if (tab == std::string::npos || !parse_count(line.substr(0, tab), &label) || label >= classes ||
        !inside_root(line.substr(tab + 1), root, /*root_itself=*/false) ||
        class_folder(line.substr(tab + 1), root) != listing.classes[static_cast<std::size_t>(label)])
      return std::nullopt;
    listing.labels.push_back(label);
    listing.paths.push_back(line.substr(tab + 1));
  }
  if (static_cast<int64_t>(listing.paths.size()) != files) return std::nullopt;  // truncated
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
  // Exclusively, under a name no one can plant a link at: the directory may be a team's.
  const std::string why = datasets::replace_file_exclusively(path, text.str());
  if (!why.empty())
    throw Failure(TP_ERR_IO, "image_folder: cannot write the listing cache '" + path + "' (" + why +
                                 "); set `cache_dir` to a writable directory or `cache = false`");
}

}  // namespace tp::image_folder
