// PLG-2: a struct that crosses the boundary starts with uint32_t struct_size, and the reader copies
// min(struct_size, sizeof) bytes into a zeroed local, so members the producer did not know about
// read as zero/NULL and members the reader does not know about are ignored.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tp::detail {

/// The producer's struct_size: how much of the struct it knew when it was built.
inline uint32_t struct_size_of(const void* source) {
  uint32_t size = 0;
  std::memcpy(&size, source, sizeof size);
  return size;
}

/// True when a producer that wrote `struct_size` bytes included the member at [offset, offset +
/// member_size) (PLG-2). A member it did not include reads as zero in sized_copy(); this tells
/// "built before the member existed" from "left it NULL" for messages.
inline bool has_member(uint32_t struct_size, std::size_t offset, std::size_t member_size) {
  return offset + member_size <= struct_size;
}

/// A zeroed T with the first min(struct_size, sizeof(T)) bytes of `source` copied in.
template <typename T>
T sized_copy(const void* source) {
  T copy{};
  const uint32_t size = struct_size_of(source);
  std::memcpy(static_cast<void*>(&copy), source, std::min<std::size_t>(size, sizeof(T)));
  return copy;
}

}  // namespace tp::detail
