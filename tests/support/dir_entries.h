// The names a directory holds, for tests that check what a command left behind.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace tp::test {

/// The file names in `dir` (not recursive; hidden ones included), sorted.
inline std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tp::test
