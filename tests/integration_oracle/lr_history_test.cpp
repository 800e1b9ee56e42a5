// The history's `lr` is the lr each logged step trained with (docs/schedules.md), checked against
// PyTorch's OneCycleLR (lr_history_oracle.py) over a 50-step run logged at every step; so is each
// `lr/group<i>`, which only groups at different lrs record (docs/training.md).
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

TEST_CASE("history.jsonl records the lr each step trained with (OneCycleLR before its step)") {
  const auto dir = tp::test::fresh_dir("lr_history");
  const auto run = tp::test::run_host("--config tests/integration_oracle/ema.toml --output-dir '" + dir.string() +
                                      "' --set ema.enabled=false --set checkpoint.strategy=\"no\" "
                                      "--set train.log_every_steps=1 --set schedule.name=\"one_cycle\" "
                                      "--set schedule.max_lr=0.1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto oracle = tp::test::run_shell(std::string("'") + tp::test::python() +
                                          "' tests/integration_oracle/lr_history_oracle.py '" + dir.string() + "' 0.1 50");
  INFO(oracle.output);
  REQUIRE(oracle.exit_code == 0);
  std::istringstream in(oracle.output);
  std::string tag;
  double diff = 1;
  int steps = 0;
  in >> tag >> diff >> steps;
  CHECK(tag == "lr");
  CHECK(steps == 50);
  CHECK(diff <= 1e-12);
}

namespace {
// A warm-up and a cosine: the lr changes at every one of the run's 50 steps, so a value read after
// the schedule stepped (the next step's lr) differs from the one the step trained with.
const std::string kWarmupCosine = "--config tests/integration_oracle/ema.toml --set ema.enabled=false "
                                  "--set checkpoint.strategy=\"no\" --set train.log_every_steps=1 "
                                  "--set schedule.name=\"cosine\" --set schedule.warmup_steps=4 ";
}  // namespace

TEST_CASE("parameter groups at one lr (the weight-decay split) record and plot `lr` only") {
  // AdamW with weight decay: small_cnn's weights decay, its biases and norm scales do not, two
  // groups at optim.lr.
  const auto dir = tp::test::fresh_dir("lr_history_one_lr");
  const auto run = tp::test::run_host(kWarmupCosine + "--output-dir '" + dir.string() +
                                      "' --set optim.name=\"adamw\" --set optim.lr=0.001 "
                                      "--set optim.weight_decay=0.05 --set plots.enabled=true");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto steps = tp::test::rows_of(tp::test::read_history(dir), "step");
  REQUIRE(steps.size() == 50);
  std::set<double> lrs;
  for (const auto& row : steps) {
    REQUIRE(row.has("lr"));
    lrs.insert(row.values.at("lr"));
    for (const auto& [key, value] : row.values) CHECK_FALSE(key.starts_with("lr/group"));
  }
  CHECK(lrs.size() > 10); // the schedule did move the lr
  CHECK(std::filesystem::exists(dir / "plots" / "lr.png"));
  CHECK_FALSE(std::filesystem::exists(dir / "plots" / "lr_group0.png"));
}

TEST_CASE("lr/group<i> is the lr each group trained with: group 0's equals `lr` at every step") {
  // optim.layer_decay = 0.5 over small_cnn's four depths: group 0 (the head) is the schedule's own
  // lr, the others 0.5, 0.25 and 0.125 of it, at every step of the warm-up and the cosine.
  const auto dir = tp::test::fresh_dir("lr_history_groups");
  const auto run =
      tp::test::run_host(kWarmupCosine + "--output-dir '" + dir.string() + "' --set optim.layer_decay=0.5");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto steps = tp::test::rows_of(tp::test::read_history(dir), "step");
  REQUIRE(steps.size() == 50);
  for (const auto& row : steps) {
    INFO("step " << row.values.at("step"));
    const double lr = row.values.at("lr");
    REQUIRE(row.has("lr/group0"));
    CHECK(row.values.at("lr/group0") == lr);
    if (lr == 0) continue; // the warm-up's first step
    std::set<double> scales;
    for (const auto& [key, value] : row.values)
      if (key.starts_with("lr/group")) scales.insert(value / lr);
    CHECK(scales == std::set<double>{0.125, 0.25, 0.5, 1.0});
  }
}
