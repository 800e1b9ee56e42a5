// Named scalar values, the currency between the engine's roles, the history and callbacks.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tp/framework/util/short_number.h"

namespace tp {

/// Named scalar values ("val/loss", "val/accuracy"), in the order they were produced.
using Scalars = std::vector<std::pair<std::string, double>>;

/// `values` as log text, " name=value" each with short_number (" val/loss=0.12 val/accuracy=0.98"):
/// the epoch line, a step evaluation's line and the run's last line read alike.
inline std::string scalars_text(const Scalars& values) {
  std::string text;
  for (const auto& [name, value] : values) text += " " + name + "=" + short_number(value);
  return text;
}

}  // namespace tp
