// Helpers shared by the loader tests: where the fixtures are, a host to load them with, and the
// message of a refusal.
#pragma once

#include <filesystem>
#include <string>

// Framework headers (LibTorch-using ones among them) before doctest: both define CHECK-style macros.
#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace tp::test {

/// The directory of one fixture case (tests/fixtures/bad_plugins writes <case>/<case>.so).
inline std::filesystem::path fixture_dir(const std::string& dir) {
  return std::filesystem::path(tp::test::bad_plugin_dir()) / dir;
}

/// The library file of fixture `name`, in directory `dir` (its own, unless it shares one).
inline std::filesystem::path fixture(const std::string& name, const std::string& dir = "") {
  return fixture_dir(dir.empty() ? name : dir) / (name + ".so");
}

/// A host as `host` builds one for a single-process run. Outlives every library loaded with it.
struct TestHost {
  Logger logger;
  HostServices services{logger, ProcessPlace{}};
};

/// True when `text` contains `part`.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Runs `fn`, which must throw tp::PluginLoadError, and returns its message ("" after a failed
/// check when nothing, or something else, was thrown).
template <typename Fn>
std::string load_error(Fn&& fn) {
  try {
    fn();
  } catch (const PluginLoadError& e) {
    CHECK(e.exit_code() == kExitPlugin);
    return e.what();
  }
  FAIL_CHECK("expected a tp::PluginLoadError");
  return "";
}

/// The refusal message of PluginLibrary::load for fixture `name`.
inline std::string library_refusal(const std::string& name) {
  const std::filesystem::path file = fixture(name);
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(file), "fixture not built: " << file);
  TestHost host;
  return load_error([&] { PluginLibrary::load(file, host.services); });
}

}  // namespace tp::test
