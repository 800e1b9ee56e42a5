#include "tp/framework/config/closest_key.h"

#include <algorithm>
#include <numeric>

namespace tp {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Two-row dynamic programme: O(|a|*|b|) time, O(|b|) memory; keys are short.
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string closest_key(std::string_view key, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(2, key.size() / 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    // The distance is at least the difference in length: a candidate that cannot be within the
    // limit is not measured, so a 100 KB key from a hostile --set costs nothing (the quadratic
    // measure took the config fuzzer past its timeout).
    const std::size_t length_gap = key.size() > candidate.size() ? key.size() - candidate.size()
                                                                 : candidate.size() - key.size();
    if (length_gap >= best_distance) continue;
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace tp
