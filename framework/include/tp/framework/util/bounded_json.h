// JSON from outside the process (an export's header, a server's answer) parsed with a nesting
// bound. nlohmann's parser is iterative, but copying and printing a value recurse: a crafted file of
// a few hundred kB nested 200,000 deep overflowed the stack wherever such a value was copied, a
// crash instead of an error (security trial F1). Include only where nlohmann_json is linked.
#pragma once

#include <nlohmann/json.hpp>

namespace tp {

/// Deeper than any JSON this project reads or writes (safetensors headers, metadata, MLflow).
inline constexpr int kMaxJsonDepth = 64;

/// `[first, last)` parsed as JSON, or a discarded value (is_discarded()) when it is not JSON or
/// holds arrays and objects nested deeper than `max_depth`. Never throws a parse error.
/// Example:
///   const nlohmann::json header = parse_bounded_json(text.begin(), text.end());
///   if (header.is_discarded()) ... // damaged
template <class Json = nlohmann::json, class Iterator>
Json parse_bounded_json(Iterator first, Iterator last, int max_depth = kMaxJsonDepth) {
  struct TooDeep {};
  try {
    return Json::parse(
        first, last,
        [max_depth](int depth, typename Json::parse_event_t, Json&) {
          if (depth > max_depth) throw TooDeep{};
          return true;
        },
        /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    return Json(Json::value_t::discarded);
  }
}

/// parse_bounded_json over a whole string.
template <class Json = nlohmann::json>
Json parse_bounded_json(const std::string& text, int max_depth = kMaxJsonDepth) {
  return parse_bounded_json<Json>(text.begin(), text.end(), max_depth);
}

}  // namespace tp
