// The tests' absolute paths, given by tests/CMakeLists.txt (tp_test_paths) to this file alone.
#include "support/test_paths.h"

namespace tp::test {

const char* build_dir() { return TP_TEST_BUILD_DIR; }
const char* source_dir() { return TP_TEST_SOURCE_DIR; }
const char* plugin_dir() { return TP_TEST_BUILD_DIR "/plugins"; }
const char* fixture_plugin_dir() { return TP_TEST_BUILD_DIR "/tests/fixtures/plugins"; }
const char* bad_plugin_dir() { return TP_TEST_BUILD_DIR "/tests/fixtures/bad"; }
const char* check_plugin_dir() { return TP_TEST_BUILD_DIR "/tests/fixtures/check"; }
const char* python() { return TP_TEST_PYTHON; }
const char* bench_python() { return TP_TEST_SOURCE_DIR "/.venv-bench/bin/python"; }

}  // namespace tp::test
