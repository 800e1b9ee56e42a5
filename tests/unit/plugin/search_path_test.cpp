// The plugin search path: its order (docs/architecture.md, run step 3), which missing
// directories are errors, and shadowing between levels.
#include <unistd.h>

#include "loader_test_util.h"

namespace {

using namespace tp;
using namespace tp::test;

TEST_CASE("the search path orders --plugin-dir, config dirs, TORCHHOST_PLUGIN_PATH, built-in") {
  const std::vector<PluginDir> dirs =
      plugin_search_path({"/cli/a", "/cli/b"}, {"/cfg/a", "/cfg/b"}, "/env/a::/env/b:", "/opt/torchhost/plugins");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"/cli/a", "--plugin-dir"},          {"/cli/b", "--plugin-dir"},
      {"/cfg/a", "plugins.dirs"},          {"/cfg/b", "plugins.dirs"},
      {"/env/a", "TORCHHOST_PLUGIN_PATH"}, {"/env/b", "TORCHHOST_PLUGIN_PATH"}, // empty entries skipped
      {"/opt/torchhost/plugins", "built-in"},
  };
  REQUIRE(dirs.size() == expected.size());
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    CHECK(dirs[i].path == expected[i].first);
    CHECK(dirs[i].origin == expected[i].second);
  }
}

TEST_CASE("an empty environment and no built-in directory add nothing") {
  const std::vector<PluginDir> dirs = plugin_search_path({}, {"/cfg"}, "", {});
  REQUIRE(dirs.size() == 1);
  CHECK(dirs[0].origin == "plugins.dirs");
}

TEST_CASE("a missing directory the user named is an error; implicit ones may be absent") {
  const std::string missing = fixture_dir("no_such_directory").string();
  for (const char* origin : {"--plugin-dir", "plugins.dirs"}) {
    CAPTURE(origin);
    TestHost host;
    Registry registry(host.services);
    const std::string message = load_error([&] { registry.load_search_path({{missing, origin}}); });
    CHECK_MESSAGE(contains(message, missing), message);
    CHECK_MESSAGE(contains(message, origin), message);
  }
  for (const char* origin : {"TORCHHOST_PLUGIN_PATH", "built-in"}) {
    CAPTURE(origin);
    TestHost host;
    Registry registry(host.services);
    CHECK_NOTHROW(registry.load_search_path({{missing, origin}}));
    CHECK(registry.libraries().empty());
  }
}

TEST_CASE("a higher-precedence directory shadows the same component lower down") {
  // A copy of good_callback.so in a directory of its own stands for a user's rebuilt plugin. A copy
  // (another inode), not a link: the dynamic loader would hand back the already-loaded library.
  const std::filesystem::path user_dir =
      std::filesystem::temp_directory_path() / ("tp_loader_shadow_" + std::to_string(::getpid()));
  std::filesystem::remove_all(user_dir);
  std::filesystem::create_directories(user_dir);
  std::filesystem::copy_file(fixture("good_callback"), user_dir / "good_callback.so");
  {
    TestHost host;
    Registry registry(host.services);
    registry.load_search_path({{user_dir, "--plugin-dir"}, {fixture_dir("good_callback"), "built-in"}});
    CHECK(registry.libraries().size() == 2);
    const std::vector<ComponentEntry> all = registry.all();
    REQUIRE(all.size() == 1);
    CHECK(all[0].library->path() == user_dir / "good_callback.so");
  }
  std::filesystem::remove_all(user_dir);
}

}  // namespace
