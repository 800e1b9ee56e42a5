#include "tp/framework/util/bounded_text.h"

#include <cstdint>
#include <cstdio>

#include "tp/framework/util/utf8.h"

namespace tp {

std::string bounded_text(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  const std::size_t head = limit / 4 * 3;
  const std::size_t tail = limit / 8;
  return std::string(text.substr(0, head)) + " ... [" + std::to_string(text.size() - head - tail) +
         " bytes left out] ... " + std::string(text.substr(text.size() - tail));
}

std::string escape_control_characters(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  char escape[16];
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = i;
    const int32_t code = next_code_point(text, i);
    if (code < 0) {
      std::snprintf(escape, sizeof escape, "\\x%02X", static_cast<unsigned>(static_cast<unsigned char>(text[i])));
      out += escape;
      ++i;
      continue;
    }
    const bool kept = code == '\t' || (code == '\n' && keep_newlines);
    if (!kept && (code < 0x20 || (code >= 0x7F && code <= 0x9F))) {
      std::snprintf(escape, sizeof escape, "\\u%04X", static_cast<unsigned>(code));
      out += escape;
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

}  // namespace tp
