// Metric names as file names: "val/accuracy" -> "val_accuracy" (plots/<stem>.png and the
// comparison's comparison_<stem>_step.png).
#pragma once

#include <string>
#include <string_view>

namespace tp::detail {

/// `name` with every character outside [A-Za-z0-9_.-] turned into '_', prefixed with "metric"
/// when it would be empty or start with '.': safe as a file name on every file system we meet.
inline std::string file_stem(std::string_view name) {
  std::string stem;
  for (const char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.';
    stem += keep ? c : '_';
  }
  return stem.empty() || stem.front() == '.' ? "metric" + stem : stem;
}

}  // namespace tp::detail
