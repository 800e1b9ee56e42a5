// CRC-32C (Castagnoli, polynomial 0x1EDC6F41 reflected), the checksum of sealed checkpoints
// (checkpoint/checkpoint_seal.h) and of TFRecord framing (monitor/tfrecord.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tp {

/// CRC-32C (Castagnoli) of `size` bytes, continuing from `crc` (0 to start). Uses the SSE4.2
/// instruction when the CPU has it (~0.16 s of CPU per GB), else a table (10-30x slower); both
/// give the same value.
/// Example:
///   crc32c("123456789", 9) == 0xe3069283  // the standard check value
///   crc32c(b, nb, crc32c(a, na)) == crc32c(a followed by b)
uint32_t crc32c(const void* data, std::size_t size, uint32_t crc = 0);

}  // namespace tp
