// UTF-8 decoding, one code point at a time: what class names (data/class_names.h) must be and
// what a prediction file's JSON strings escape when a file's path is not (a Latin-1 name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tp {

/// The code point of the UTF-8 sequence at `text[i]`, advancing `i` past it; -1 for a malformed
/// sequence (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, a
/// value above U+10FFFF), which a shortest-form decoder must refuse (Unicode 15, table 3-7); `i`
/// then stays where it was. `i` must be below text.size().
/// Example:
///   std::size_t i = 0;
///   next_code_point("\xc3\xa9", i);  // 0xE9, i == 2
inline int32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return text[i++];
  const int length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (length == 0 || lead > 0xF4 || i + length > text.size()) return -1;
  int32_t code = lead & (0xFF >> (length + 1));
  for (int k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return -1;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr int32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return -1;
  i += static_cast<std::size_t>(length);
  return code;
}

}  // namespace tp
