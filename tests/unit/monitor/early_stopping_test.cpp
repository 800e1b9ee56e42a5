// EarlyStopping (monitor/early_stopping.h) on sequences whose stopping evaluation Lightning 2.6.6's
// EarlyStopping decides as written here (its _evaluate_stopping_criteria fed the same values, strict
// comparisons): the thresholds (stop_below / stop_above: Lightning's stopping_threshold and
// divergence_threshold by mode), the patience rule, min_epochs (Lightning's Trainer min_epochs),
// and a resumed run's verdict.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "tp/framework/error.h"
#include "tp/framework/monitor/early_stopping.h"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

tp::EarlyStoppingSection options(const std::string& mode, int64_t patience, double below = -kInf, double above = kInf,
                                 int64_t min_epochs = 0) {
  return {.patience = patience, .monitor = "m", .mode = mode, .min_delta = 0.0, .check_finite = true,
          .stop_below = below, .stop_above = above, .min_epochs = min_epochs};
}

/// The 1-based evaluation at which `stopping` stops on `values` (one per epoch), and its reason; 0
/// and "" when it never does.
std::pair<int, std::string> first_stop(tp::EarlyStopping& stopping, const std::vector<double>& values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (std::optional<std::string> reason = stopping.update({{"m", values[i]}}, static_cast<int64_t>(i) + 1))
      return {static_cast<int>(i) + 1, *reason};
  return {0, ""};
}

}  // namespace

TEST_CASE("early stopping's thresholds stop where Lightning's stopping and divergence thresholds do") {
  // min: stopping_threshold = 0.5 -> stop_below; a value equal to it does not stop.
  tp::EarlyStopping below(options("min", 10, 0.5));
  const auto [at, reason] = first_stop(below, {0.9, 0.7, 0.5, 0.49});
  CHECK(at == 4);
  CHECK(reason == "m = 0.49 is below early_stopping.stop_below = 0.5");
  // min: divergence_threshold = 2.0 -> stop_above.
  tp::EarlyStopping diverged(options("min", 10, -kInf, 2.0));
  CHECK(first_stop(diverged, {0.9, 0.7, 1.5, 2.1}).first == 4);
  // max: stopping_threshold = 0.8 -> stop_above; divergence_threshold = 0.2 -> stop_below.
  tp::EarlyStopping reached(options("max", 10, -kInf, 0.8));
  CHECK(first_stop(reached, {0.1, 0.5, 0.8, 0.81}).first == 4);
  tp::EarlyStopping fell(options("max", 10, 0.2));
  CHECK(first_stop(fell, {0.5, 0.4, 0.2, 0.19}).first == 4);
  // Thresholds alone (patience 0) turn early stopping on; without them and patience it is off.
  tp::EarlyStopping thresholds_only(options("min", 0, 0.5));
  CHECK(thresholds_only.enabled());
  CHECK(first_stop(thresholds_only, {0.9, 0.9, 0.9, 0.4}).first == 4);
  CHECK_FALSE(tp::EarlyStopping(options("min", 0)).enabled());
}

TEST_CASE("early stopping's patience stops where Lightning's does") {
  tp::EarlyStopping stopping(options("min", 2));
  const auto [at, reason] = first_stop(stopping, {1.0, 0.9, 0.95, 0.91, 0.92});
  CHECK(at == 4);
  CHECK(reason == "m has not improved on 0.9 for 2 evaluations (early_stopping.patience = 2)");
}

TEST_CASE("min_epochs holds a stop back until that many epochs are trained, and the stop stays called for") {
  // Lightning: EarlyStopping sets trainer.should_stop = should_stop or it, and the fit loop ignores
  // it while fewer than min_epochs epochs are processed; it stops at the first check after.
  // Patience 1 calls for a stop after epoch 2; min_epochs = 4 holds it until epoch 4.
  tp::EarlyStopping patience(options("min", 1, -kInf, kInf, 4));
  const auto [at, reason] = first_stop(patience, {1.0, 1.1, 1.2, 1.3, 1.4});
  CHECK(at == 4);
  CHECK(reason == "m has not improved on 1 for 1 evaluations (early_stopping.patience = 1); called for before "
                  "early_stopping.min_epochs = 4 epochs were trained, and held until then");
  tp::EarlyStopping threshold(options("min", 0, 0.5, kInf, 3));
  CHECK(first_stop(threshold, {0.4, 0.4, 0.4}).first == 3);
  // A held stop whose cause has gone by min_epochs still happens (Lightning's should_stop stays set).
  tp::EarlyStopping recovered(options("min", 0, 0.5, kInf, 3));
  CHECK(first_stop(recovered, {0.4, 0.4, 0.6, 0.6}).first == 3);
  // A non-finite value stops at once (Lightning would hold it too): every later evaluation would be non-finite.
  tp::EarlyStopping diverged(options("min", 1, -kInf, kInf, 10));
  CHECK(first_stop(diverged, {1.0, std::nan("")}).first == 2);
  // A threshold leaves the patience count alone (Lightning's elif chain).
  tp::EarlyStopping counted(options("min", 5, 0.5, kInf, 10));
  CHECK(first_stop(counted, {1.0, 1.1, 0.4}).first == 0);
  CHECK(counted.state().at(1) == 1.0);
}

TEST_CASE("a resumed run stops where the uninterrupted one does: taken stops stay taken, held ones wait for min_epochs") {
  tp::EarlyStopping stopped(options("max", 0, -kInf, 0.8));
  REQUIRE(first_stop(stopped, {0.5, 0.9}).first == 2);
  const std::vector<double> state = stopped.state();
  REQUIRE(state.size() == 7);
  tp::EarlyStopping resumed(options("max", 0, -kInf, 0.8));
  resumed.load_state(state);
  CHECK(resumed.ended_run(2) == std::optional<std::string>("m had reached 0.9, above early_stopping.stop_above = 0.8"));
  tp::EarlyStopping raised(options("max", 0, -kInf, 0.95));
  raised.load_state(state);
  CHECK_FALSE(raised.ended_run(2).has_value());
  // A checkpoint from before the thresholds (three values) reads as not stopped by one.
  tp::EarlyStopping old(options("max", 3, -kInf, 0.8));
  old.load_state({0.9, 1.0, 0.0});
  CHECK_FALSE(old.ended_run(2).has_value());
  // A three-value state whose count reached the patience was a taken stop (no min_epochs then).
  tp::EarlyStopping old_stop(options("min", 2));
  old_stop.load_state({0.9, 2.0, 0.0});
  CHECK(old_stop.ended_run(3).has_value());
  // The review's case: a patience stop held by min_epochs at the save has not ended the run; the
  // resumed run takes it at min_epochs even though the value improved meanwhile, as the
  // uninterrupted one does.
  tp::EarlyStopping held(options("min", 1, -kInf, kInf, 4));
  REQUIRE(first_stop(held, {1.0, 1.1}).first == 0);
  tp::EarlyStopping held_resumed(options("min", 1, -kInf, kInf, 4));
  held_resumed.load_state(held.state());
  CHECK_FALSE(held_resumed.ended_run(2).has_value());
  CHECK_FALSE(held_resumed.update({{"m", 0.8}}, 3).has_value());
  CHECK(held_resumed.update({{"m", 0.7}}, 4).has_value());
  // Once taken, the stop ends the resumed run; a patience raised above its count lets it train on.
  tp::EarlyStopping taken(options("min", 1, -kInf, kInf, 4));
  taken.load_state(held_resumed.state());
  CHECK(taken.ended_run(4).has_value());
  tp::EarlyStopping more_patient(options("min", 3, -kInf, kInf, 4));
  more_patient.load_state(held_resumed.state());
  CHECK_FALSE(more_patient.ended_run(4).has_value());
}

TEST_CASE("stop_below not below stop_above is refused: every value would stop the run") {
  bool refused = false;
  try {
    tp::EarlyStopping stopping(options("min", 0, 0.5, 0.5));
  } catch (const tp::ConfigError& e) {
    refused = std::string(e.what()).find("early_stopping.stop_below = 0.5 is not below stop_above = 0.5") !=
              std::string::npos;
  }
  CHECK(refused);
}
