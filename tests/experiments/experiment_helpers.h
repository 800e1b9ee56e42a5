// Shared by the sweep and compare tests: the tiny config's command line, a CSV reader and
// small file helpers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "integration/host_runner.h"

namespace tp::test {

/// The common part of every `host train`/`host sweep` command of these tests.
inline const std::string kTiny = "--config tests/experiments/tiny.toml ";

/// RFC 4180 CSV (quoted cells with "" escapes, no newlines inside cells) as rows of cells.
inline std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& file) {
  std::vector<std::vector<std::string>> rows;
  const std::string text = read_text(file);
  std::size_t at = 0;
  while (at < text.size()) {
    std::vector<std::string> row;
    std::string cell;
    bool quoted = false;
    for (; at < text.size(); ++at) {
      const char c = text[at];
      if (quoted) {
        if (c == '"' && at + 1 < text.size() && text[at + 1] == '"') cell += text[++at];
        else if (c == '"') quoted = false;
        else cell += c;
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        row.push_back(cell);
        cell.clear();
      } else if (c == '\n') {
        ++at;
        break;
      } else {
        cell += c;
      }
    }
    row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

/// The index of `name` in a CSV header, or -1.
inline int column(const std::vector<std::string>& header, const std::string& name) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

/// How many times `needle` occurs in `text`.
inline std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

}  // namespace tp::test
