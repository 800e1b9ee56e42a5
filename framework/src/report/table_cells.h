// A table cell written as CSV (RFC 4180 quoting) or as GitHub Markdown ('|' escaped): shared by
// the comparison's tables (comparison.cpp) and its groups over seeds (seed_groups.cpp).
#pragma once

#include <string>

namespace tp::detail {

/// `text` as one CSV cell: quoted, with "" for a quote, when it holds a comma, quote or newline.
inline std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// `text` as one Markdown table cell: '|' escaped.
inline std::string markdown_cell(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace tp::detail
