// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
// all little-endian (tensorflow/core/lib/io/record_writer.cc; the masking is
// tensorflow/core/lib/hash/crc32c.h's Mask: rotate right by 15 bits, add 0xa282ead8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tp {

/// The masked CRC-32C TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8 of `data`.
/// Example: masked_crc32c("") == 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);

/// `data` framed as one TFRecord (16 bytes of framing around it).
std::string tfrecord_frame(std::string_view data);

/// The records of a TFRecord stream, in order.
struct TfRecords {
  std::vector<std::string_view> records; ///< views into the bytes passed to split_tfrecords
  std::size_t valid_bytes = 0;           ///< bytes up to the end of the last good record
};

/// Splits `bytes` into records. Stops at the first record that is cut short or whose checksums do
/// not match, and reports how far the good records reach: an event file whose writer was killed
/// mid-record (or ran out of disk) keeps every record before the torn one.
TfRecords split_tfrecords(std::string_view bytes);

}  // namespace tp
