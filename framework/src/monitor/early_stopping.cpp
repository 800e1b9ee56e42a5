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
      threshold_value_(std::numeric_limits<double>::quiet_NaN()) {}

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
  // A diverged run is not held back by min_epochs: every later evaluation would be non-finite too.
  if (options_.check_finite && !std::isfinite(*value)) {
    stopped_non_finite_ = true;
    return options_.monitor + " became " + short_number(*value) + " (early_stopping.check_finite)";
  }
  // Lightning's order: the thresholds, then the patience rule, whose count goes on either way.
  const std::string threshold = passed_threshold(*value);
  // Lightning's rule: an improvement must beat the best by more than min_delta.
  const bool improved = options_.mode == "max" ? *value > best_ + options_.min_delta
                                               : *value < best_ - options_.min_delta;
  if (improved) {
    best_ = *value;
    wait_ = 0;
  } else {
    ++wait_;
  }
  std::string reason;
  if (!threshold.empty()) reason = options_.monitor + " = " + short_number(*value) + " is " + threshold;
  else if (options_.patience > 0 && wait_ >= options_.patience)
    reason = options_.monitor + " has not improved on " + short_number(best_) + " for " + std::to_string(wait_) +
             " evaluations (early_stopping.patience = " + std::to_string(options_.patience) + ")";
  if (reason.empty() || epochs_trained < options_.min_epochs) return std::nullopt;
  if (!threshold.empty()) threshold_value_ = *value;
  return reason;
}

std::optional<std::string> EarlyStopping::ended_run(int64_t epochs_trained) const {
  if (!enabled()) return std::nullopt;
  if (stopped_non_finite_ && options_.check_finite) return options_.monitor + " had become non-finite (early_stopping.check_finite)";
  if (epochs_trained < options_.min_epochs) return std::nullopt;
  // Judged with today's thresholds: one moved past the value lets the run train on.
  if (!std::isnan(threshold_value_))
    if (const std::string threshold = passed_threshold(threshold_value_); !threshold.empty())
      return options_.monitor + " had reached " + short_number(threshold_value_) + ", " + threshold;
  if (options_.patience == 0 || wait_ < options_.patience) return std::nullopt;
  return options_.monitor + " had not improved on " + short_number(best_) + " for " + std::to_string(wait_) +
         " evaluations (early_stopping.patience = " + std::to_string(options_.patience) + ")";
}

std::vector<double> EarlyStopping::state() const {
  if (!enabled()) return {};
  return {best_, static_cast<double>(wait_), stopped_non_finite_ ? 1.0 : 0.0, threshold_value_};
}

void EarlyStopping::load_state(const std::vector<double>& state) {
  if (!enabled() || state.size() < 2 || state.size() > 4) return;
  best_ = state[0];
  wait_ = static_cast<int64_t>(state[1]);
  stopped_non_finite_ = state.size() >= 3 && state[2] != 0.0;
  threshold_value_ = state.size() == 4 ? state[3] : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tp
