// Named scalar values, the currency between the engine's roles, the history and callbacks.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tp {

/// Named scalar values ("val/loss", "val/accuracy"), in the order they were produced.
using Scalars = std::vector<std::pair<std::string, double>>;

}  // namespace tp
