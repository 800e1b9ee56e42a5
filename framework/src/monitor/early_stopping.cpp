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
                                   : std::numeric_limits<double>::infinity()) {}

std::optional<std::string> EarlyStopping::update(const std::vector<std::pair<std::string, double>>& evaluation) {
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
  if (options_.check_finite && !std::isfinite(*value)) {
    stopped_non_finite_ = true;
    return options_.monitor + " became " + short_number(*value) + " (early_stopping.check_finite)";
  }
  // Lightning's rule: an improvement must beat the best by more than min_delta.
  const bool improved = options_.mode == "max" ? *value > best_ + options_.min_delta
                                               : *value < best_ - options_.min_delta;
  if (improved) {
    best_ = *value;
    wait_ = 0;
    return std::nullopt;
  }
  if (++wait_ < options_.patience) return std::nullopt;
  return options_.monitor + " has not improved on " + short_number(best_) + " for " + std::to_string(wait_) +
         " evaluations (early_stopping.patience = " + std::to_string(options_.patience) + ")";
}

std::optional<std::string> EarlyStopping::ended_run() const {
  if (!enabled()) return std::nullopt;
  if (stopped_non_finite_ && options_.check_finite) return options_.monitor + " had become non-finite (early_stopping.check_finite)";
  if (wait_ < options_.patience) return std::nullopt;
  return options_.monitor + " had not improved on " + short_number(best_) + " for " + std::to_string(wait_) +
         " evaluations (early_stopping.patience = " + std::to_string(options_.patience) + ")";
}

std::vector<double> EarlyStopping::state() const {
  if (!enabled()) return {};
  return {best_, static_cast<double>(wait_), stopped_non_finite_ ? 1.0 : 0.0};
}

void EarlyStopping::load_state(const std::vector<double>& state) {
  if (!enabled() || (state.size() != 2 && state.size() != 3)) return;
  best_ = state[0];
  wait_ = static_cast<int64_t>(state[1]);
  stopped_non_finite_ = state.size() == 3 && state[2] != 0.0;
}

}  // namespace tp
