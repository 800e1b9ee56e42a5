// A hash that names cache files: the same on every build and platform (std::hash is not), so a
// cache written by one run is found by the next. Collisions only cost a rescan: every cache
// names what it describes in its header and is compared on reading.
#pragma once

#include <cstdint>
#include <string_view>

namespace tp::datasets {

/// FNV-1a, 64 bits (offset basis 14695981039346656037, prime 1099511628211).
inline uint64_t fnv1a_64(std::string_view text) {
  uint64_t hash = 14695981039346656037ULL;
  for (const unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace tp::datasets
