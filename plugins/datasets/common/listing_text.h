// The text rules the datasets' listings share: case-insensitive names, which file endings a
// scan keeps, and the trimming of a listing's lines. One copy for image_folder, segmentation_folder
// and the shard writer (image_folder's and segmentation_folder's copies had drifted: one kept a
// file named exactly like an ending, the other did not).
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdio>
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

/// The code point of the UTF-8 sequence at `text[i]`, advancing `i` past it; -1 for a malformed
/// sequence (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, a
/// value above U+10FFFF), as a shortest-form decoder refuses it (Unicode 15, table 3-7).
inline int32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return text[i++];
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (length == 0 || lead > 0xF4 || i + length > text.size()) return -1;
  int32_t code = lead & (0xFF >> (length + 1));
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return -1;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr int32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return -1;
  i += length;
  return code;
}

/// Why `name` cannot be a class name the host accepts (the rule of plugin_api's tp_class_names_t:
/// UTF-8 text without control characters): "is not valid UTF-8 (byte 3)", "holds the control
/// character U+0009 (byte 1)"; "" when it can. A dataset checks its names with it at create, where
/// it can name the folder or line they came from and say what to rename.
inline std::string class_name_text_problem(std::string_view name) {
  for (std::size_t i = 0; i < name.size();) {
    const std::size_t at = i;
    const int32_t code = next_code_point(name, i);
    if (code < 0) return "is not valid UTF-8 (byte " + std::to_string(at) + ")";
    if (code < 0x20 || (code >= 0x7F && code <= 0x9F)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(code));
      return "holds the control character U+" + std::string(hex) + " (byte " + std::to_string(at) + ")";
    }
  }
  return "";
}

/// `text` with each byte that is not part of valid UTF-8, and each ASCII control character,
/// written as \xNN: a name shown in a message stays readable and the message stays UTF-8.
inline std::string shown_bytes(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    const int32_t code = next_code_point(text, i);
    if (code >= 0x20 && code != 0x7F) {
      out.append(text.substr(at, i - at));
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(static_cast<uint8_t>(text[at])));
    out += hex;
    if (code < 0) i = at + 1;  // a malformed sequence: one byte shown, the next read afresh
  }
  return out;
}

}  // namespace tp::datasets
