// Numbers in messages and logs (issue 28: no 17-digit floats where people read them).
#pragma once

#include <string>

namespace tp {

/// A number as a person reads it: printf's %g with `digits` significant digits (6: 0.000123457,
/// 1e-07, 62.2764, 3e+38, 465), and "nan", "inf" or "-inf" for the others. Files that are read
/// back (history, CSV, TOML, JSON) use format_number (monitor/history.h), the shortest text that
/// reads back as the same double. Thread-safe.
std::string short_number(double value, int digits = 6);

}  // namespace tp
