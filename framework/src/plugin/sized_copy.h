// ABI-3: a struct that crosses the boundary starts with uint32_t struct_size, and the reader copies
// min(struct_size, sizeof) bytes into a zeroed local, so members the producer did not know about
// read as zero/NULL and members the reader does not know about are ignored.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tp::detail {

template <typename T>
T sized_copy(const void* source) {
  T copy{};
  const uint32_t size = *static_cast<const uint32_t*>(source);
  std::memcpy(static_cast<void*>(&copy), source, std::min<std::size_t>(size, sizeof(T)));
  return copy;
}

}  // namespace tp::detail
