// Both heads learn: configs/multi_output.toml (one input, a class head and a box head) and
// configs/multi_input.toml (two inputs, the same heads) pass an accuracy and a box-error threshold
// after two epochs. Outside the sanitizer gate (CMakeLists.txt): the epochs check numbers, and the
// gate passes over the same paths in train_e2e_test.cpp's short case.
#include <string>

#include "history_reader.h"
#include "host_runner.h"

#include <doctest/doctest.h>

TEST_CASE("one-input/two-output and two-input/two-output configs train both heads") {
  for (const std::string name : {"multi_output", "multi_input"}) {
    const auto dir = tp::test::fresh_dir("e2e_" + name);
    // Two epochs of 46 steps: val/accuracy about 0.99 and val/mae about 0.04 after the second,
    // against thresholds of 0.95 and 0.06 (a third epoch cost 20 s here and bought no margin needed).
    const auto run = tp::test::run_host("--config configs/" + name + ".toml --output-dir '" + dir.string() +
                                        "' --set train.epochs=2 --set data.train.size=3000 --set progress.mode=\"off\"");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
    REQUIRE(epochs.size() == 2);
    CHECK(epochs.back().values.at("val/accuracy") >= 0.95); // the class head
    CHECK(epochs.back().values.at("val/mae") < 0.06);        // the box head: corners within 6% of the image
    CHECK(epochs.back().values.at("train/loss") < epochs.front().values.at("train/loss"));
  }
}
