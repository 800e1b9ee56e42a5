// "Did you mean" suggestions for unknown config keys.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tp {

/// Levenshtein distance between `a` and `b` (bytes).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `key`, or "" when none is close enough to be a plausible typo
/// (distance greater than max(2, key.size() / 3)).
std::string closest_key(std::string_view key, const std::vector<std::string>& candidates);

}  // namespace tp
