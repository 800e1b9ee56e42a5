#include "image_listing.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include "folder_walk.h"
#include "image_extensions.h"
#include "image_file.h"
#include "listing_text.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/random.h"

namespace tp::image_folder {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  std::size_t used = 0;
  try {
    *out = std::stoll(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size();
}

// The ending a file is counted under in Listing::unlisted.
std::string ending_of(const fs::path& file) {
  const std::string ext = datasets::lower_case(file.extension().string());
  return ext.empty() ? "(no ending)" : ext;
}

// Endings of image formats, beyond the defaults, that a user may have in a class folder and mean
// to train on: an unlisted file with one is worth a warning.
bool is_image_ending(const std::string& ending) {
  static constexpr std::string_view kOther[] = {".gif", ".heic", ".heif", ".avif", ".jxl", ".pbm", ".pnm",
                                                ".pfm", ".jp2",  ".j2k",  ".exr",  ".hdr", ".dib", ".jpe",
                                                ".jfif", ".ras", ".sr",   ".dng",  ".ico"};
  for (const std::string_view ext : datasets::kImageExtensions)
    if (ending == "." + std::string(ext)) return true;
  return std::find(std::begin(kOther), std::end(kOther), ending) != std::end(kOther);
}

}  // namespace

std::string describe_endings(const EndingCounts& counts) {
  std::size_t total = 0;
  std::vector<std::pair<std::size_t, std::string>> by_count;
  for (const auto& [ending, count] : counts) {
    total += count;
    by_count.emplace_back(count, ending);
  }
  if (total == 0) return "";
  // The most frequent first, then by ending: the list a user reads to see what was left out.
  std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string text = std::to_string(total) + (total == 1 ? " file (" : " files (");
  for (std::size_t i = 0; i < by_count.size(); ++i)
    text += (i == 0 ? "" : ", ") + by_count[i].second + ": " + std::to_string(by_count[i].first);
  return text + ")";
}

UnlistedNote unlisted_note(const Listing& listing) {
  EndingCounts total;
  for (const EndingCounts& counts : listing.unlisted)
    for (const auto& [ending, count] : counts) total[ending] += count;
  UnlistedNote note;
  if (total.empty()) return note;
  for (const auto& [ending, count] : total) note.images = note.images || is_image_ending(ending);
  note.text = "the class folders hold " + describe_endings(total) +
              " whose ending is not in `extensions`: they are not listed (torchvision's ImageFolder skips them "
              "too); add an ending to `extensions` if its files are images to train on";
  return note;
}

Listing scan_folder(const std::string& root, const std::vector<std::string>& extensions,
                    std::vector<std::string>* walked, const char* key) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    // Missing or no directory: the config names the wrong place. Not readable (EACCES, a stale
    // mount): the place may be right, and the error says why.
    if (ec && ec != std::errc::no_such_file_or_directory)
      throw Failure(TP_ERR_IO, std::string("image_folder: ") + key + " '" + root + "' cannot be read: " + ec.message());
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " '" + root + "' is not a directory; set `" + key +
                                 "` to a folder holding one sub-folder per class");
  }
  Listing out;
  std::error_code list_error;
  for (fs::directory_iterator it(root, list_error), end; !list_error && it != end; it.increment(list_error)) {
    // A link whose target cannot be read (dangling, a loop) is no class folder, as for os.scandir.
    std::error_code kind_error;
    if (it->is_directory(kind_error)) out.classes.push_back(it->path().filename().string());
  }
  if (list_error)
    throw Failure(TP_ERR_IO, std::string("image_folder: ") + key + " '" + root + "' cannot be read: " + list_error.message());
  std::sort(out.classes.begin(), out.classes.end());
  if (walked != nullptr) walked->push_back(root);
  if (out.classes.empty())
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " '" + root + "' has no class sub-folders; expected " +
                                     key + "/<class>/<image> (or set `csv`)");
  for (std::size_t c = 0; c < out.classes.size(); ++c) {
    // (directory, file name) pairs: torchvision walks sorted(os.walk(...)), then sorted(fnames).
    std::vector<std::pair<std::string, std::string>> files;
    const fs::path dir = fs::path(root) / out.classes[c];
    const datasets::FolderWalk walk = datasets::walk_folder(dir, "image_folder");
    if (walked != nullptr) walked->insert(walked->end(), walk.directories.begin(), walk.directories.end());
    for (const std::string& loop : walk.loops) out.loops.push_back(out.classes[c] + "/" + loop);
    EndingCounts& unlisted = out.unlisted.emplace_back();
    for (const fs::path& file : walk.files) {
      const std::string name = file.filename().string();
      if (datasets::has_extension(name, extensions))
        files.emplace_back(file.parent_path().string(), name);
      else
        ++unlisted[ending_of(file)];
    }
    std::sort(files.begin(), files.end());
    for (auto& [parent, name] : files) {
      out.paths.push_back((fs::path(parent) / name).string());
      out.labels.push_back(static_cast<int64_t>(c));
    }
  }
  if (out.paths.empty()) {
    std::string endings;
    for (const std::string& ending : extensions) endings += (endings.empty() ? "" : " ") + ending;
    EndingCounts found;
    for (const EndingCounts& counts : out.unlisted)
      for (const auto& [ending, count] : counts) found[ending] += count;
    throw Failure(TP_ERR_CONFIG, "image_folder: no image files under '" + root + "' (looked inside each class folder "
                                     "for the endings in `extensions`: " + endings + "; " +
                                     (found.empty() ? std::string("the class folders hold no file at all")
                                                    : "the class folders hold " + describe_endings(found) +
                                                          ": add their ending to `extensions` if they are images") +
                                     ")");
  }
  return out;
}

Listing read_csv_listing(const std::string& csv_path, const std::string& base_dir, bool allow_outside_root) {
  std::ifstream in(csv_path);
  if (!in) throw Failure(TP_ERR_IO, "image_folder: cannot open csv '" + csv_path + "'; check `csv`");
  std::vector<std::string> paths, label_cells;
  std::vector<int64_t> lines;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string t = datasets::trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::size_t comma = t.rfind(',');
    if (comma == std::string::npos)
      throw Failure(TP_ERR_CONFIG, "image_folder: " + csv_path + ":" + std::to_string(number) +
                                       ": expected `path,label`, got '" + t + "'");
    std::string path = datasets::trim(t.substr(0, comma));
    std::string label = datasets::trim(t.substr(comma + 1));
    if (paths.empty() && label_cells.empty() && datasets::lower_case(path) == "path" && datasets::lower_case(label) == "label") continue;
    if (path.empty() || label.empty())
      throw Failure(TP_ERR_CONFIG, "image_folder: " + csv_path + ":" + std::to_string(number) +
                                       ": empty path or label in '" + t + "'");
    // A row names a file under `root`: an absolute path or one climbing out with '..' reads any
    // file the user can (issue 58), unless the table says the listing reaches files elsewhere.
    if (const std::string why = datasets::escapes_root(path); !why.empty() && !allow_outside_root)
      throw Failure(TP_ERR_CONFIG, "image_folder: " + csv_path + ":" + std::to_string(number) + ": the path '" + path +
                                       "' names a file outside `root` (" + base_dir + "): it " + why +
                                       "; list paths inside it, or set allow_outside_root = true if the listing is "
                                       "meant to reach files elsewhere");
    const fs::path p(path);
    paths.push_back(p.is_absolute() ? path : (fs::path(base_dir) / p).string());
    label_cells.push_back(std::move(label));
    lines.push_back(number);
  }
  if (paths.empty()) throw Failure(TP_ERR_CONFIG, "image_folder: csv '" + csv_path + "' lists no image");

  Listing out;
  out.paths = std::move(paths);
  int64_t value = 0;
  const bool numeric = parse_int(label_cells.front(), &value);
  if (numeric) {
    int64_t max_label = 0;
    for (std::size_t i = 0; i < label_cells.size(); ++i) {
      if (!parse_int(label_cells[i], &value) || value < 0)
        throw Failure(TP_ERR_CONFIG, "image_folder: " + csv_path + ":" + std::to_string(lines[i]) + ": label '" +
                                         label_cells[i] +
                                         "' is not a non-negative integer (the first row's label is, so all must be)");
      out.labels.push_back(value);
      max_label = std::max(max_label, value);
    }
    for (int64_t c = 0; c <= max_label; ++c) out.classes.push_back(std::to_string(c));
  } else {
    std::map<std::string, int64_t> ids;
    for (const std::string& cell : label_cells) ids.emplace(cell, 0);
    for (auto& [name, id] : ids) {
      id = static_cast<int64_t>(out.classes.size());
      out.classes.push_back(name);
    }
    for (const std::string& cell : label_cells) out.labels.push_back(ids.at(cell));
  }
  return out;
}

std::pair<Listing, Listing> split_listing(const Listing& all, double val_fraction, uint64_t seed) {
  const std::size_t n = all.paths.size();
  const std::vector<bool> is_val = tp::cpp::seeded_holdout(n, val_fraction, seed, "image_folder", "images");
  Listing train, val;
  train.classes = val.classes = all.classes;
  train.loops = val.loops = all.loops;
  train.unlisted = val.unlisted = all.unlisted;
  train.from_cache = val.from_cache = all.from_cache;
  for (std::size_t i = 0; i < n; ++i) {
    Listing& part = is_val[i] ? val : train;
    part.paths.push_back(all.paths[i]);
    part.labels.push_back(all.labels[i]);
  }
  return {std::move(train), std::move(val)};
}

}  // namespace tp::image_folder
