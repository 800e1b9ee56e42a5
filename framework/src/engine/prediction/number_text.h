// How predictions print a number: the shortest text that reads back to the same value, float32
// values as float32 (a logit prints as 0.1 rather than 0.10000000149011612). Shared by the csv /
// jsonl writers and the jsonl arrays of ragged outputs, so both spell a value the same way.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>

namespace tp::detail {

/// `value` as the shortest round-tripping text; a non-finite floating value as `non_finite_as`
/// when given ("null" in JSON), else as Python's float() reads it ("nan", "inf", "-inf").
template <typename T>
std::string number_text(T value, const char* non_finite_as) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return non_finite_as != nullptr ? non_finite_as : std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

}  // namespace tp::detail
