#include "image_listing.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include "class_split.h"
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

bool is_hidden_folder(const std::string& name) { return (!name.empty() && name[0] == '.') || name == "__MACOSX"; }

std::string skipped_folders_text(const Listing& listing) {
  std::string text;
  for (const std::string& name : listing.skipped_folders) text += (text.empty() ? "'" : ", '") + datasets::shown_bytes(name) + "'";
  return text;
}

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
    if (!it->is_directory(kind_error)) continue;
    std::string name = it->path().filename().string();
    (is_hidden_folder(name) ? out.skipped_folders : out.classes).push_back(std::move(name));
  }
  if (list_error)
    throw Failure(TP_ERR_IO, std::string("image_folder: ") + key + " '" + root + "' cannot be read: " + list_error.message());
  std::sort(out.classes.begin(), out.classes.end());
  std::sort(out.skipped_folders.begin(), out.skipped_folders.end());
  // A class name is UTF-8 text (it goes into checkpoints, predictions, plots): a Latin-1 folder
  // name from an old zip or Windows share failed later, in the host's check of the names the
  // plugin lends, with a message about the plugin ABI and no folder named (data trial F7).
  for (const std::string& name : out.classes)
    if (const std::string problem = datasets::class_name_text_problem(name); !problem.empty())
      throw Failure(TP_ERR_CONFIG, "image_folder: the class folder '" + datasets::shown_bytes((fs::path(root) / name).string()) +
                                       "' has a name that " + problem + ", and a class name must be UTF-8 text "
                                       "without control characters (it is written into checkpoints and "
                                       "predictions); rename the folder to valid UTF-8 (for Latin-1 names: convmv "
                                       "-f latin1 -t utf8 --notest on it)");
  if (walked != nullptr) walked->push_back(root);
  if (out.classes.empty())
    throw Failure(TP_ERR_CONFIG, std::string("image_folder: ") + key + " '" + root + "' has no class sub-folders" +
                                     (out.skipped_folders.empty() ? "" : " (only hidden ones, which are not classes: " +
                                                                            skipped_folders_text(out) + ")") +
                                     "; expected " + key + "/<class>/<image> (or set `csv`)");
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

std::pair<Listing, Listing> split_listing(const Listing& all, double val_fraction, uint64_t seed, bool stratified) {
  const std::size_t n = all.paths.size();
  if (stratified && all.labels.size() != n)
    throw Failure(TP_ERR_CONFIG, "image_folder: val_split_stratified = true draws each class's share, and a "
                                 "multi-label listing gives an image several classes; set it to false (or give a "
                                 "held-out val_csv)");
  const std::vector<bool> is_val = stratified ? stratified_holdout(all.labels, all.classes.size(), val_fraction, seed)
                                              : tp::cpp::seeded_holdout(n, val_fraction, seed, "image_folder", "images");
  Listing train, val;
  train.classes = val.classes = all.classes;
  train.loops = val.loops = all.loops;
  train.unlisted = val.unlisted = all.unlisted;
  train.skipped_folders = val.skipped_folders = all.skipped_folders;
  train.warnings = all.warnings;  // logged once, by the split that trains
  train.from_cache = val.from_cache = all.from_cache;
  for (std::size_t i = 0; i < n; ++i) {
    Listing& part = is_val[i] ? val : train;
    part.paths.push_back(all.paths[i]);
    if (!all.labels.empty()) part.labels.push_back(all.labels[i]);
    if (!all.label_sets.empty()) part.label_sets.push_back(all.label_sets[i]);
  }
  // Rare classes lose all their val (or training) images to a random holdout without a word
  // (data trial F3): the parts' warnings name them, with what to change.
  train.split_totals = val.split_totals = class_counts(all);
  warn_split_classes(train.split_totals, class_counts(train), class_counts(val), val_fraction, stratified, train, val);
  return {std::move(train), std::move(val)};
}

}  // namespace tp::image_folder
