#include "tp/framework/util/output_target.h"

#include <system_error>

#include "tp/framework/error.h"

namespace tp {
namespace fs = std::filesystem;
namespace {

/// "a directory", "a character device", ...: what a path is, for a message.
std::string file_type_text(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::symlink: return "a symbolic link";
    default: return "not a regular file";
  }
}

}  // namespace

void check_output_file(const fs::path& path, const std::string& key, const std::string& what) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error); // follows a link: what would be written
  if (!fs::exists(status) || fs::is_regular_file(status)) return;
  throw ConfigError(key, key + " " + path.string() + " is " + file_type_text(status.type()) + ", not a file; " + what +
                             " are written to a regular file (replaced once the new one is complete) or a new name. "
                             "Nothing was changed there; choose another " + key + ".");
}

std::vector<fs::path> previous_output_directory(const fs::path& path, const std::string& key,
                                                const OutputDirectoryKind& kind) {
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (!fs::exists(status)) return {};
  const std::string refusal = " Nothing was changed there; choose a new " + key + " (the host never replaces "
                              "what it did not write) or remove it yourself.";
  if (!fs::is_directory(status))
    throw ConfigError(key, key + " " + path.string() + " exists and is " + file_type_text(status.type()) + ", where " +
                               kind.description + " is a directory." + refusal);
  std::vector<fs::path> entries;
  bool marked = false;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_error;
    const bool file = entry.is_regular_file(type_error) && !entry.is_symlink(type_error);
    if (file && name == kind.marker) marked = true;
    else if (!file || !kind.owned(name))
      throw ConfigError(key, key + " " + path.string() + " exists and holds '" + name + "', which " + kind.description +
                                 " does not write." + refusal);
    entries.push_back(entry.path());
  }
  if (error)
    throw ConfigError(key, key + " " + path.string() + " exists and cannot be listed (" + error.message() + ")." + refusal);
  if (!entries.empty() && !marked)
    throw ConfigError(key, key + " " + path.string() + " exists and is not " + kind.description + " (it has no " +
                               kind.marker + ")." + refusal);
  return entries;
}

}  // namespace tp
