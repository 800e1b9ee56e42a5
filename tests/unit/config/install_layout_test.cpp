// Where the host finds its plugins and reference.toml, relative to its executable: the install's
// layout when it is there, the build tree's otherwise (tp/framework/config/install_layout.h). The
// installed case, moved, is run end to end by tests/package/consumer_build.sh.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/config/install_layout.h"

#include "unit/config/config_test_util.h"

namespace {

namespace fs = std::filesystem;

/// A fresh, empty directory for one test case, removed by the destructor.
struct TempPrefix {
  fs::path root = fs::temp_directory_path() / ("tp_install_layout_" + std::to_string(::getpid()));
  TempPrefix() {
    fs::remove_all(root);
    fs::create_directories(root / "bin");
  }
  ~TempPrefix() { fs::remove_all(root); }
};

TEST_CASE("an installed host uses lib/torchhost/plugins and its own reference.toml") {
  TempPrefix prefix;
  fs::create_directories(prefix.root / "lib/torchhost/plugins");
  fs::create_directories(prefix.root / "share/torchhost/configs");
  std::ofstream(prefix.root / "share/torchhost/configs/reference.toml") << "[run]\n";
  CHECK(tp::builtin_plugin_dir_of(prefix.root / "bin") == prefix.root / "lib/torchhost/plugins");
  CHECK(tp::reference_config_of(prefix.root / "bin") ==
        (prefix.root / "share/torchhost/configs/reference.toml").string());
}

TEST_CASE("a build tree's host uses build/plugins and names the source tree's reference.toml") {
  TempPrefix build;
  CHECK(tp::builtin_plugin_dir_of(build.root / "bin") == build.root / "plugins");
  CHECK(tp::reference_config_of(build.root / "bin") == "configs/reference.toml");
  CHECK(tp::builtin_plugin_dir_of({}).empty());
  CHECK(tp::reference_config_of({}) == "configs/reference.toml");
}

TEST_CASE("the running executable's directory is the one holding this test executable") {
  const fs::path dir = tp::executable_dir();
  REQUIRE_FALSE(dir.empty());
  CHECK(dir.is_absolute());
  CHECK(fs::is_regular_file(dir / "config_tests"));
}

}  // namespace
