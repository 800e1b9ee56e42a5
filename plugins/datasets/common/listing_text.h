// The text rules the datasets' listings share: case-insensitive names, which file endings a
// scan keeps, and the trimming of a listing's lines. One copy for image_folder, segmentation_folder
// and the shard writer (image_folder's and segmentation_folder's copies had drifted: one kept a
// file named exactly like an ending, the other did not).
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace tp::datasets {

/// `text` in ASCII lower case (bytes outside ASCII unchanged).
inline std::string lower_case(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Whether `name` ends with one of `endings`, ignoring case: torchvision's
/// `has_file_allowed_extension` (`name.lower().endswith(endings)`), so a file named exactly
/// ".png" is kept as torchvision keeps it.
inline bool has_extension(std::string_view name, const std::vector<std::string>& endings) {
  const std::string lowered = lower_case(name);
  for (const std::string& ending : endings) {
    const std::string tail = lower_case(ending);
    if (lowered.size() >= tail.size() && lowered.compare(lowered.size() - tail.size(), tail.size(), tail) == 0)
      return true;
  }
  return false;
}

/// `line` without leading and trailing white space (std::isspace: space, tab, CR, LF, VT, FF).
inline std::string trim(std::string_view line) {
  std::size_t begin = 0, end = line.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(line[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(line[end - 1]))) --end;
  return std::string(line.substr(begin, end - begin));
}

}  // namespace tp::datasets
