#include "tp/framework/util/crc32c.h"

#include <array>
#include <cstring>

namespace tp {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1; // reflected Castagnoli
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t crc32c_table(const unsigned char* p, std::size_t n, uint32_t crc) {
  for (std::size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// One 8-byte crc32 instruction per word: ~3 cycles each, so ~8 GB/s on one core.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const unsigned char* p, std::size_t n, uint32_t crc) {
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  return crc32c_table(p, n, static_cast<uint32_t>(c));
}
#endif

}  // namespace

uint32_t crc32c(const void* data, std::size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return ~crc32c_sse42(p, size, crc);
#endif
  return ~crc32c_table(p, size, crc);
}

}  // namespace tp
