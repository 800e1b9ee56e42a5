// The history's `lr` is the lr each logged step trained with (docs/schedules.md), checked against
// PyTorch's OneCycleLR (lr_history_oracle.py) over a 50-step run logged at every step.
#include <sstream>
#include <string>

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
