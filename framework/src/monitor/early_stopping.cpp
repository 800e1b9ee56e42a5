#include "tp/framework/monitor/early_stopping.h"

#include <cmath>
#include <limits>

#include "tp/framework/monitor/history.h"
#include "tp/framework/error.h"
#include "tp/framework/util/short_number.h"

namespace tp {

EarlyStopping::EarlyStopping(EarlyStoppingSection options)
    : options_(std::move(options)),
      best_(options_.mode == "max" ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity()),
      threshold_value_(std::numeric_limits<double>::quiet_NaN()) {
  // Every value is below one or above the other: the first evaluation would stop the run
  // (fine-tune trial F8).
  if (options_.stop_below >= options_.stop_above)
    throw ConfigError("early_stopping.stop_below",
                      "early_stopping.stop_below = " + short_number(options_.stop_below) + " is not below stop_above = " +
                          short_number(options_.stop_above) + ": every value of " + options_.monitor +
                          " passes one of them, so the first evaluation would stop the run. Give stop_below the "
                          "lower bound (the good side in mode min, the diverged side in mode max).");
}

bool EarlyStopping::enabled() const {
  return options_.patience > 0 || options_.stop_below > -std::numeric_limits<double>::infinity() ||
         options_.stop_above < std::numeric_limits<double>::infinity();
}

std::string EarlyStopping::passed_threshold(double value) const {
  // Strictly past, as Lightning compares: a value equal to a threshold does not stop.
  if (value < options_.stop_below) return "below early_stopping.stop_below = " + short_number(options_.stop_below);
  if (value > options_.stop_above) return "above early_stopping.stop_above = " + short_number(options_.stop_above);
  return "";
}

std::string EarlyStopping::reason(bool had) const {
  if (called_ == Cause::kThreshold)
    return options_.monitor + (had ? " had reached " : " = ") + short_number(threshold_value_) + (had ? ", " : " is ") +
           passed_threshold(threshold_value_);
  return options_.monitor + (had ? " had not improved on " : " has not improved on ") + short_number(best_) + " for " +
         std::to_string(called_wait_) + " evaluations (early_stopping.patience = " + std::to_string(options_.patience) + ")";
}

std::optional<std::string> EarlyStopping::update(const std::vector<std::pair<std::string, double>>& evaluation,
                                                 int64_t epochs_trained) {
  if (!enabled()) return std::nullopt;
  const double* value = nullptr;
  std::string names;
  for (const auto& [name, v] : evaluation) {
    if (name == options_.monitor) value = &v;
    names += (names.empty() ? "" : ", ") + name;
  }
  if (value == nullptr)
    throw ConfigError("early_stopping.monitor", "early_stopping.monitor = \"" + options_.monitor +
                                                    "\" is not among the evaluated values (" + names +
                                                    "). Set it to one of them.");
  // A diverged run is not held back by min_epochs (Lightning holds it): every later evaluation
  // would be non-finite too.
  if (options_.check_finite && !std::isfinite(*value)) {
    stopped_non_finite_ = true;
    return options_.monitor + " became " + short_number(*value) + " (early_stopping.check_finite)";
  }
  // Lightning's order: a threshold (which leaves the patience count alone), else the patience rule.
  if (!passed_threshold(*value).empty()) {
    threshold_value_ = *value;
    called_ = Cause::kThreshold;
  } else if (options_.mode == "max" ? *value > best_ + options_.min_delta : *value < best_ - options_.min_delta) {
    // Lightning's rule: an improvement must beat the best by more than min_delta.
    best_ = *value;
    wait_ = 0;
  } else if (++wait_ >= options_.patience && options_.patience > 0 && called_ == Cause::kNone) {
    called_ = Cause::kPatience;
    called_wait_ = wait_;
  }
  // A stop once called for stays called for (Lightning's should_stop): min_epochs only delays it.
  if (called_ == Cause::kNone) return std::nullopt;
  if (epochs_trained < options_.min_epochs) {
    held_ = true;
    return std::nullopt;
  }
  taken_ = true;
  return reason(false) + (held_ ? "; called for before early_stopping.min_epochs = " +
                                      std::to_string(options_.min_epochs) + " epochs were trained, and held until then"
                                : "");
}

std::optional<std::string> EarlyStopping::ended_run(int64_t epochs_trained) const {
  if (!enabled()) return std::nullopt;
  if (stopped_non_finite_ && options_.check_finite) return options_.monitor + " had become non-finite (early_stopping.check_finite)";
  // A stop held back at the save has not ended the run: it happens at the first evaluation once
  // min_epochs are trained, as in the run that was not interrupted.
  if (!taken_ || epochs_trained < options_.min_epochs) return std::nullopt;
  // Judged with today's settings: a threshold moved past the value, or a patience raised above the
  // count, lets the run train on.
  if (called_ == Cause::kThreshold && !passed_threshold(threshold_value_).empty()) return reason(true);
  if (called_ == Cause::kPatience && options_.patience > 0 && called_wait_ >= options_.patience) return reason(true);
  return std::nullopt;
}

std::vector<double> EarlyStopping::state() const {
  if (!enabled()) return {};
  return {best_, static_cast<double>(wait_), stopped_non_finite_ ? 1.0 : 0.0, threshold_value_,
          static_cast<double>(static_cast<int>(called_)), taken_ ? 1.0 : 0.0, static_cast<double>(called_wait_)};
}

void EarlyStopping::load_state(const std::vector<double>& state) {
  // The sizes checkpoints hold: 2 and 3 (before and after the non-finite flag), 7 (state()).
  if (!enabled() || (state.size() != 2 && state.size() != 3 && state.size() != 7)) return;
  best_ = state[0];
  wait_ = static_cast<int64_t>(state[1]);
  stopped_non_finite_ = state.size() >= 3 && state[2] != 0.0;
  if (state.size() == 7) {
    threshold_value_ = state[3];
    const int cause = static_cast<int>(state[4]);
    called_ = cause == 1 ? Cause::kPatience : cause == 2 ? Cause::kThreshold : Cause::kNone;
    taken_ = state[5] != 0.0;
    called_wait_ = static_cast<int64_t>(state[6]);
  } else {
    // Before min_epochs every stop was taken when called: a patience count at the patience was one.
    const bool patience_stop = options_.patience > 0 && wait_ >= options_.patience;
    called_ = patience_stop ? Cause::kPatience : Cause::kNone;
    taken_ = patience_stop;
    called_wait_ = wait_;
  }
}

}  // namespace tp
