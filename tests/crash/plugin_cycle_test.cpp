// Plugin load/unload cycles: every built-in plugin and the C fixture is loaded, exercised by the
// `host plugins check` routine (create/destroy every component, sample datasets, forward and
// backward through models) and released, many times. Asserts that nothing holds a library after
// its last reference is dropped (its PluginLibrary is destroyed: deinit ran, dlclose was called),
// that a library stays mapped once loaded (RTLD_NODELETE, plugin_library.cpp: a thread a plugin
// left running cannot fault in unmapped code) and a reload maps nothing new (the link-map count
// stays at the baseline), and, in the sanitize build (scripts/sanitize), LeakSanitizer fails the
// test at exit if any cycle leaked memory.
#include <link.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_check.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using namespace tp;

int loaded_objects() {
  int count = 0;
  dl_iterate_phdr([](dl_phdr_info*, size_t, void* data) { return ++*static_cast<int*>(data), 0; }, &count);
  return count;
}

bool is_loaded(const std::filesystem::path& file) {
  struct Search {
    std::string name;
    bool found = false;
  } search{file.filename().string()};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name != nullptr && std::filesystem::path(info->dlpi_name).filename() == s->name) s->found = true;
        return 0;
      },
      &search);
  return search.found;
}

std::vector<std::filesystem::path> plugin_files() {
  std::vector<std::filesystem::path> files;
  for (const char* name : {"shapes", "vision_models", "basic_losses", "basic_metrics"})
    files.push_back(std::filesystem::path(tp::test::plugin_dir()) / (std::string(name) + ".so"));
  files.push_back(std::filesystem::path(tp::test::fixture_plugin_dir()) / "c_dataset.so");
  return files;
}

TEST_CASE("load, exercise and release every built-in plugin repeatedly: nothing holds it, nothing new is mapped") {
  Logger logger;
  HostServices services{logger, ProcessPlace{}};
  const auto files = plugin_files();
  // Warm-up: the first load pulls in dependencies that stay (LibTorch is the host's own; OpenCV
  // and its TBB may be marked NODELETE), so the baseline is taken after one full cycle.
  for (const auto& file : files) (void)check_library(PluginLibrary::load(file, services));
  const int baseline = loaded_objects();
  constexpr int kCycles = 6;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    for (const auto& file : files) {
      INFO("cycle " << cycle << ", " << file);
      std::weak_ptr<PluginLibrary> released;
      {
        const auto library = PluginLibrary::load(file, services);
        released = library;
        CHECK(is_loaded(file));
        for (const CheckLine& line : check_library(library)) CHECK_MESSAGE(line.ok, line.component << ": " << line.what);
      }
      CHECK_MESSAGE(released.expired(), "a component, tensor or proxy still holds the library");
      CHECK_MESSAGE(is_loaded(file), "unmapped at dlclose: RTLD_NODELETE is gone (plugin_library.cpp)");
    }
    CHECK(loaded_objects() == baseline);
  }
}

TEST_CASE("plain load/unload of every plugin 30 times returns to the same set of loaded objects") {
  Logger logger;
  HostServices services{logger, ProcessPlace{}};
  const auto files = plugin_files();
  for (const auto& file : files) (void)PluginLibrary::load(file, services);
  const int baseline = loaded_objects();
  for (int cycle = 0; cycle < 30; ++cycle)
    for (const auto& file : files) {
      const auto library = PluginLibrary::load(file, services);
      REQUIRE(!library->components().empty());
    }
  CHECK(loaded_objects() == baseline);
}

}  // namespace
