#include "predict_images.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <system_error>

#include "tp/framework/engine/run_components.h"
#include "tp/framework/error.h"
#include "tp/framework/util/bounded_text.h"

namespace tp::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOption = "--images";

// A file name or path as a message shows it: names in an images directory are anyone's (an upload
// folder), and an ESC or newline in one recoloured the terminal or forged a log line (security
// trial F7).
std::string printable_name(const std::string& text) { return escape_control_characters(text, /*keep_newlines=*/false); }

// What a directory entry that is no regular file is, for the note that leaves it out: a FIFO or a
// device was counted under "endings" the table does not read, though its ending was .jpg (security
// trial F15).
std::string what_it_is(const fs::path& entry) {
  std::error_code error;
  const fs::file_status status = fs::status(entry, error);
  if (fs::is_fifo(status)) return "a FIFO";
  if (fs::is_character_file(status)) return "a character device";
  if (fs::is_block_file(status)) return "a block device";
  if (fs::is_socket(status)) return "a socket";
  return "no regular file";
}

// image_folder's default `extensions`, torchvision's IMG_EXTENSIONS
// (plugins/datasets/common/image_extensions.h; the host includes no plugin code, ARCH-1): what a
// dataset that reads `files` but declares no `extensions` key is given, so that opting in with
// `files` alone works.
std::vector<std::string> default_image_endings() {
  return {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
}

// Whether `name` ends with one of `endings` in ASCII case-insensitive comparison: image_folder's
// rule for its class folders (torchvision's endswith on the lower-cased name).
bool has_ending(const std::string& name, const std::vector<std::string>& endings) {
  const auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
  for (const std::string& ending : endings)
    if (name.size() >= ending.size() &&
        std::equal(ending.begin(), ending.end(), name.end() - static_cast<std::ptrdiff_t>(ending.size()),
                   [&](char a, char b) { return lower(a) == lower(b); }))
      return true;
  return false;
}

// What a directory walk passed over, for one line that says so: a batch job that predicted 1 of
// 6 files said "for 1 samples" and nothing else (deployment trial F7).
struct LeftOut {
  std::map<std::string, int64_t> endings; ///< files not read, by lower-case ending ("(none)" without one)
  std::vector<std::string> not_files;     ///< FIFOs, devices, sockets (or links to them): "name (a FIFO)"
  std::vector<std::string> dead_links;    ///< links that lead nowhere or to themselves, relative to DIR
  std::vector<std::string> linked_dirs;   ///< symlinked directories, not entered

  void note(const fs::path& entry, const fs::path& relative) {
    std::error_code error;
    if (fs::is_symlink(fs::symlink_status(entry, error)) && !fs::exists(entry, error)) {
      dead_links.push_back(relative.generic_string());
    } else if (fs::is_directory(entry, error)) {
      if (fs::is_symlink(fs::symlink_status(entry, error))) linked_dirs.push_back(relative.generic_string());
    } else if (!fs::is_regular_file(entry, error)) {
      not_files.push_back(relative.generic_string() + " (" + what_it_is(entry) + ")");
    } else {
      std::string ending = relative.extension().string();
      std::transform(ending.begin(), ending.end(), ending.begin(), [](unsigned char c) { return std::tolower(c); });
      ++endings[ending.empty() ? "(none)" : ending];
    }
  }

  /// The warning for `dir`, or "" when nothing was left out.
  std::string text(const fs::path& dir) const {
    const auto names = [](std::vector<std::string> list) {
      std::sort(list.begin(), list.end()); // the walk's order is the file system's
      std::string out;
      for (std::size_t i = 0; i < list.size() && i < 5; ++i) out += (i == 0 ? "" : ", ") + printable_name(list[i]);
      return out + (list.size() > 5 ? ", ..." : "");
    };
    std::vector<std::string> parts;
    if (!endings.empty()) {
      int64_t count = 0;
      std::string by_ending;
      for (const auto& [ending, n] : endings) {
        count += n;
        by_ending += (by_ending.empty() ? "" : ", ") + printable_name(ending) + ": " + std::to_string(n);
      }
      parts.push_back(std::to_string(count) + " file(s) whose ending is not one the evaluation table reads (" +
                      by_ending + ")");
    }
    if (!not_files.empty())
      parts.push_back(std::to_string(not_files.size()) + " entr(ies) that are no regular file, which an image must be (" +
                      names(not_files) + ")");
    if (!dead_links.empty())
      parts.push_back(std::to_string(dead_links.size()) + " link(s) that lead nowhere (" + names(dead_links) + ")");
    if (!linked_dirs.empty())
      parts.push_back(std::to_string(linked_dirs.size()) + " linked director(ies), not entered (" +
                      names(linked_dirs) + ")");
    if (parts.empty()) return "";
    std::string out = "host predict --images: left out of '" + printable_name(dir.string()) + "': ";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : "; ") + parts[i];
    out += ".";
    if (!endings.empty()) out += " Rename an image whose ending hides it (a JPEG saved as .jfif), or give the files as a list.";
    if (!not_files.empty()) out += " An image is read from a regular file (or a link to one): copy such data into one.";
    return out;
  }
};

ImageFiles files_under(const fs::path& dir, const std::vector<std::string>& extensions) {
  std::vector<fs::path> found;
  LeftOut left_out;
  std::error_code error;
  // Symlinked directories are not entered: a link back up the tree would never end the walk.
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code kind_error;
    if (fs::is_regular_file(it->path(), kind_error) && has_ending(it->path().filename().string(), extensions))
      found.push_back(it->path().lexically_relative(dir));
    else
      left_out.note(it->path(), it->path().lexically_relative(dir));
  }
  if (error)
    throw ConfigError(kOption, "host predict --images: cannot read the directory '" + printable_name(dir.string()) + "': " +
                                   error.message() + ".");
  std::vector<std::string> shown;
  shown.reserve(found.size());
  for (const fs::path& path : found) shown.push_back(path.generic_string());
  std::sort(shown.begin(), shown.end());
  if (shown.empty()) {
    std::string endings;
    for (const std::string& ending : extensions) endings += (endings.empty() ? " (ending in " : " ") + ending;
    if (!endings.empty())
      endings += ", any case: the evaluation table's `extensions`, or image_folder's default endings when its "
                 "dataset declares no such key)";
    throw ConfigError(kOption, "host predict --images: the directory '" + printable_name(dir.string()) + "' holds no image file" +
                                   endings + ".");
  }
  ImageFiles files;
  const fs::path base = fs::absolute(dir);
  for (const std::string& path : shown) files.opened.push_back((base / path).string());
  files.shown = std::move(shown);
  files.left_out = left_out.text(dir);
  return files;
}

// Whether `file` starts as a JPEG, PNG, BMP, WebP, TIFF or PPM/PGM file does: one image given, not
// a list. A BMP is "BM" with four zero reserved bytes at 6, which no list line ("BMW/1.jpg") has; a
// netpbm file "P1".."P6" and a blank.
bool starts_as_image(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::array<unsigned char, 12> head{};
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  const auto starts = [&](std::initializer_list<unsigned char> magic, std::size_t at = 0) {
    return static_cast<std::size_t>(in.gcount()) >= at + magic.size() &&
           std::equal(magic.begin(), magic.end(), head.begin() + static_cast<std::ptrdiff_t>(at));
  };
  const bool netpbm = in.gcount() >= 3 && head[0] == 'P' && head[1] >= '1' && head[1] <= '6' &&
                      std::isspace(head[2]) != 0;
  return starts({0xFF, 0xD8, 0xFF}) || starts({0x89, 'P', 'N', 'G'}) || (starts({'B', 'M'}) && starts({0, 0, 0, 0}, 6)) ||
         (starts({'R', 'I', 'F', 'F'}) && starts({'W', 'E', 'B', 'P'}, 8)) || starts({'I', 'I', 42, 0}) ||
         starts({'M', 'M', 0, 42}) || netpbm;
}

std::string trimmed(const std::string& line) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  const auto begin = std::find_if_not(line.begin(), line.end(), space);
  const auto end = std::find_if_not(line.rbegin(), std::string::const_reverse_iterator(begin), space).base();
  return std::string(begin, end);
}

ImageFiles files_listed(const fs::path& list) {
  std::ifstream in(list);
  if (!in) throw ConfigError(kOption, "host predict --images: cannot read the list '" + printable_name(list.string()) + "'.");
  const fs::path base = fs::absolute(list).parent_path();
  ImageFiles files;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    // Notepad's and Excel's UTF-8 byte-order mark: kept, it began the first path, invisibly in a
    // terminal ("names '\ufeffa,b.jpg', which does not exist", data trial F6).
    if (++number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    const std::string path = trimmed(line);
    if (path.empty() || path.front() == '#') continue;
    const fs::path opened = fs::path(path).is_absolute() ? fs::path(path) : base / path;
    std::error_code error;
    if (!fs::is_regular_file(opened, error)) {
      const std::string why = fs::exists(opened, error) ? "which is not a file" : "which does not exist";
      const std::string base_note =
          fs::path(path).is_absolute() ? "" : " (relative paths start from the list's directory)";
      throw ConfigError(kOption, "host predict --images: line " + std::to_string(number) + " of '" + printable_name(list.string()) +
                                     "' names '" + printable_name(path) + "', " + why + base_note + ".");
    }
    files.shown.push_back(path);
    files.opened.push_back(opened.string());
  }
  if (in.bad()) throw ConfigError(kOption, "host predict --images: reading the list '" + printable_name(list.string()) + "' failed.");
  if (files.shown.empty())
    throw ConfigError(kOption, "host predict --images: the list '" + printable_name(list.string()) +
                                   "' names no file (one path per line; blank lines and '#' lines are skipped).");
  return files;
}

}  // namespace

ImageFiles list_image_files(const std::string& source, const std::vector<std::string>& extensions) {
  std::error_code error;
  const fs::file_status status = fs::status(source, error);
  if (fs::is_directory(status)) return files_under(source, extensions);
  if (fs::is_regular_file(status)) {
    // An image by its bytes, or by an image ending (a damaged one then fails as an image, naming
    // the file, instead of being read as a list: data trial F18's .tif).
    if (starts_as_image(source) || has_ending(fs::path(source).filename().string(), extensions))
      return ImageFiles{{source}, {fs::absolute(source).string()}, ""};
    return files_listed(source);
  }
  throw ConfigError(kOption, "host predict --images: '" + printable_name(source) + "' " +
                                 (fs::exists(status) ? "is neither a directory nor a list file"
                                                     : "does not exist") +
                                 "; give a directory of images or a text file listing them, one per line.");
}

std::vector<std::string> image_extensions(const RunConfig& config, const Registry& registry) {
  const ComponentConfig* table = dataset_table(config, "val");
  if (table == nullptr)
    throw ConfigError("data.val", "host predict --images reads the files with the run's evaluation table, "
                                  "[data.val] or [data.train] under data.val_from_train = true; the run has neither.");
  const ComponentEntry entry = registry.find(table->component, TP_KIND_DATASET, table->key_path);
  const auto& schema = entry.info->schema;
  const bool reads_files = std::any_of(schema.begin(), schema.end(), [](const KeySpec& key) {
    return key.path == "files" && key.type == ValueType::StringArray;
  });
  if (!reads_files)
    throw ConfigError(table->key_path + ".component",
                      "host predict --images: the evaluation table [" + table->key_path + "]'s dataset '" +
                          table->component +
                          "' cannot read plain image files (it declares no `files` key, the list of unlabelled files "
                          "org.torchhost.image_folder reads). Predict its own splits with --split val|test, or "
                          "predict files with a run whose evaluation table is an image_folder.");
  const bool declares_endings = std::any_of(schema.begin(), schema.end(), [](const KeySpec& key) {
    return key.path == "extensions" && key.type == ValueType::StringArray;
  });
  if (!declares_endings) return default_image_endings();
  std::vector<std::string> extensions;
  if (const toml::array* endings = table->options["extensions"].as_array())
    for (const toml::node& ending : *endings)
      if (const auto text = ending.value<std::string>()) extensions.push_back(*text);
  return extensions;
}

ComponentConfig val_table_reading(const RunConfig& config, const ImageFiles& files) {
  ComponentConfig table = *dataset_table(config, "val");
  toml::array opened;
  for (const std::string& path : files.opened) opened.push_back(path);
  table.options.insert_or_assign("files", std::move(opened));
  return table;
}

}  // namespace tp::cli
