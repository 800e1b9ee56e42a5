// A checkpoint keeps the training data's class names (plugin ABI 1.12) for `host export` and
// `host predict`: they round-trip, a checkpoint without them (every file written before) loads
// with none, and names a crafted file smuggles in (a line break for a CSV row) are refused.
#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

tp::LoadedCheckpoint round_trip(const tp::ClassNames& classes, const std::string& name) {
  const std::vector<tp::StateTensor> state = {{"fc.weight", at::ones({2, 3}), true}};
  tp::CheckpointContents contents;
  contents.model_state = &state;
  contents.classes = classes;
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".pt");
  tp::save_checkpoint(path, contents);
  struct Remove {
    std::filesystem::path path;
    ~Remove() { std::filesystem::remove(path); }
  } remove{path};
  return tp::load_checkpoint(path);
}

}  // namespace

TEST_CASE("a checkpoint's class names round-trip; one without them loads with none") {
  const tp::ClassNames classes{"label", {"Schäferhund", "cat, black", "猫"}};
  CHECK(round_trip(classes, "classes").classes == classes);
  CHECK(round_trip({}, "no_classes").classes.empty());
}

TEST_CASE("a checkpoint whose class names hold a control character is refused as damaged") {
  try {
    (void)round_trip({"label", {"cat", "dog\nindex,forged"}}, "bad_classes");
    FAIL("a class name with a line break was loaded");
  } catch (const tp::CheckpointError& e) {
    CHECK(std::string(e.what()).find("U+000A") != std::string::npos);
  }
}
