#include "tp/framework/monitor/tfrecord.h"

#include "tp/framework/util/crc32c.h"

namespace tp {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view bytes, std::size_t at, int size) {
  uint64_t v = 0;
  for (int i = size - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

}  // namespace

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  const uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  put_u32(out, masked_crc32c(std::string_view(out.data(), 8)));
  out.append(data);
  put_u32(out, masked_crc32c(data));
  return out;
}

TfRecords split_tfrecords(std::string_view bytes) {
  TfRecords result;
  std::size_t at = 0;
  while (bytes.size() - at >= 12) {
    const uint64_t length = get_le(bytes, at, 8);
    if (get_le(bytes, at + 8, 4) != masked_crc32c(bytes.substr(at, 8))) break;
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4) break; // cut short
    const std::string_view data = bytes.substr(at + 12, length);
    if (get_le(bytes, at + 12 + length, 4) != masked_crc32c(data)) break;
    result.records.push_back(data);
    at += 16 + length;
  }
  result.valid_bytes = at;
  return result;
}

}  // namespace tp
