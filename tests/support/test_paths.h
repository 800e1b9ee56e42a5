// Where the tests find the build, the checkout and the Python oracles. These are the only absolute
// paths a test needs, and they live in one small library (test_paths.cpp, compiled with them as
// -D values by tests/CMakeLists.txt), not on every test's compile line: a path on a compile line
// makes that translation unit differ between two checkouts, and ccache could then never serve CI's
// fresh clone the work the working checkout already did (docs/build.md, "ccache").
#pragma once

namespace tp::test {

/// The build tree the tests were configured in (CMAKE_BINARY_DIR): executables in bin/, the
/// built-in plugins in plugins/, fixtures under tests/, scratch runs under test-runs/.
const char* build_dir();
/// The checkout (CMAKE_SOURCE_DIR): configs, docs and the tests' data files; the tests run from here.
const char* source_dir();
/// build_dir()/plugins: the built-in plugins (the host's default plugin directory in a build tree).
const char* plugin_dir();
/// build_dir()/tests/fixtures/plugins: the test fixtures' plugins, apart from the built-in ones.
const char* fixture_plugin_dir();
/// build_dir()/tests/fixtures/bad: the plugins that break one loader rule each (TP_BAD_PLUGIN_DIR,
/// tests/fixtures/bad_plugins), one folder per case.
const char* bad_plugin_dir();
/// build_dir()/tests/fixtures/check: the plugins `host plugins check` must refuse (TP_CHECK_PLUGIN_DIR,
/// tests/fixtures/check_plugins), one folder per case.
const char* check_plugin_dir();
/// The Python with torch that the oracle tests compare against (TP_TEST_PYTHON, .venv by default).
const char* python();
/// The Python with torchvision, timm and Lightning (.venv-bench, scripts/bench_setup); it may not exist.
const char* bench_python();

}  // namespace tp::test
