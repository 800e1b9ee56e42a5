// What the `host verify` tests share: running it into a fresh directory and reading its table.
#pragma once

#include <sstream>
#include <string>

#include "integration/host_runner.h"
#include "tp/framework/error.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace tp::test {

/// The fixture config (tests/verify/fixture.toml) with the fixture plugins' directory.
inline const std::string kFixture = "--config tests/verify/fixture.toml --plugin-dir '" +
                                    std::string(tp::test::fixture_plugin_dir()) + "' ";

/// `host verify <args>` into a fresh directory named `name`.

inline HostRun verify(const std::string& name, const std::string& args) {
  const auto dir = tp::test::fresh_dir(name);
  return tp::test::run_host("verify " + args + " --output-dir '" + dir.string() + "'");
}

/// The result word ("PASS", "FAIL", "SKIP") of the table row of `check`, or "" without one.
inline std::string result_of(const std::string& output, const std::string& check) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(check + " ")) continue;
    std::istringstream words(line.substr(check.size()));
    std::string result;
    words >> result;
    return result;
  }
  return "";
}

/// The row of `check` and the indented lines under it.
inline std::string row_of(const std::string& output, const std::string& check) {
  const size_t start = output.find("\n" + check + " ");
  if (start == std::string::npos) return "";
  size_t end = start + 1;
  while ((end = output.find('\n', end + 1)) != std::string::npos && output.compare(end + 1, 4, "    ") == 0) {}
  return output.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

}  // namespace tp::test
