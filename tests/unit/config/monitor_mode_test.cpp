// checkpoint.mode, early_stopping.mode and schedule.mode = "auto": the direction from the monitor's
// name, recorded in the resolved table; a name that says neither is refused where it matters.
#include <string>

#include "tp/framework/config/load.h"
#include "tp/framework/config/monitor_mode.h"
#include "tp/framework/error.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::kRequiredComponents;
using tp::test::load_text;

TEST_CASE("the direction by name: loss-like lower, score-like higher, neither nothing") {
  for (const char* lower : {"val/loss", "val_ema/loss", "val/loss/box", "train/loss", "val/mae", "val/rmse",
                            "val/error_rate", "val/top1_error"})
    CHECK_MESSAGE(tp::lower_is_better_by_name(lower) == true, lower);
  for (const char* higher : {"val/accuracy", "val_ema/top5_accuracy", "val/f1", "val/miou", "val/iou_3", "val/map_50",
                             "val_swa/map", "val/mean_accuracy", "val/auc", "val/Accuracy"})
    CHECK_MESSAGE(tp::lower_is_better_by_name(higher) == false, higher);
  for (const char* neither : {"val/quality", "val/x", "", "accuracy/val"}) // a prefix cannot decide
    CHECK_MESSAGE(!tp::lower_is_better_by_name(neither).has_value(), neither);
}

TEST_CASE("auto resolves to the monitor's direction in the typed config and the resolved table") {
  // Before, "min" was the default: monitoring val/accuracy alone kept the worst checkpoint.
  const tp::RunConfig cfg = load_text(kRequiredComponents +
                                      "[checkpoint]\nmonitor = \"val/accuracy\"\n"
                                      "[early_stopping]\npatience = 2\nmonitor = \"val/loss\"\n");
  CHECK(cfg.checkpoint.mode == "max");
  CHECK(cfg.early_stopping.mode == "min");
  CHECK(cfg.resolved.at_path("checkpoint.mode").value<std::string>() == "max");
  // An explicit mode is kept, whatever the name says.
  const tp::RunConfig explicit_min =
      load_text(kRequiredComponents + "[checkpoint]\nmonitor = \"val/accuracy\"\nmode = \"min\"\n");
  CHECK(explicit_min.checkpoint.mode == "min");
  const tp::RunConfig plateau = load_text(kRequiredComponents, {"schedule.name=\"reduce_on_plateau\"",
                                                                "schedule.monitor=\"val/f1\""});
  CHECK(plateau.schedule.mode == "max");
}

TEST_CASE("a name that says neither stays auto, refused by training where the direction matters") {
  // Loading never refuses it: host eval, predict and plugins read such a config without ranking.
  const tp::RunConfig quality = load_text(kRequiredComponents + "[checkpoint]\nmonitor = \"val/quality\"\n");
  CHECK(quality.checkpoint.mode == "auto");
  try {
    tp::require_monitor_directions(quality);
    FAIL("no refusal");
  } catch (const tp::ConfigError& e) {
    const std::string message = e.what();
    CHECK(message.find("checkpoint.mode = \"auto\" cannot tell") != std::string::npos);
    CHECK(message.find("val/quality") != std::string::npos);
    CHECK(message.find("Set checkpoint.mode = \"min\" or \"max\"") != std::string::npos);
  }
  // Nothing ranks by it (no best kept, none loaded), early stopping off: training goes ahead.
  tp::require_monitor_directions(load_text(kRequiredComponents + "[checkpoint]\nmonitor = \"val/quality\"\nsave_top_k = 0\n"
                                           "[early_stopping]\nmonitor = \"val/quality\"\n"));
  CHECK_THROWS_AS(tp::require_monitor_directions(
                      load_text(kRequiredComponents + "[early_stopping]\npatience = 1\nmonitor = \"val/quality\"\n")),
                  tp::ConfigError);
  // A resolved direction passes.
  tp::require_monitor_directions(load_text(kRequiredComponents + "[checkpoint]\nmonitor = \"val/accuracy\"\n"));
}

}  // namespace
