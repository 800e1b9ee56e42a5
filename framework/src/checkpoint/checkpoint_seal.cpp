#include "tp/framework/checkpoint/checkpoint_seal.h"

#include <cstdio>
#include <cstring>

namespace tp {
namespace {

constexpr char kSealPrefix[] = "torchhost-crc32c:";
constexpr std::size_t kSealPrefixSize = sizeof kSealPrefix - 1;
constexpr std::size_t kSealSize = kSealPrefixSize + 8; // + 8 hex digits
constexpr std::size_t kEocdSize = 22;
constexpr uint32_t kEocdSignature = 0x06054b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kZip64EocdSignature = 0x06064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;

// ---- little-endian field access with bounds ----

uint16_t u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const unsigned char* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint64_t u64(const unsigned char* p) { return uint64_t(u32(p)) | uint64_t(u32(p + 4)) << 32; }

[[noreturn]] void damaged(const std::string& name, const std::string& what) {
  throw CheckpointError("checkpoint " + name + " is damaged: " + what +
                        ". Use another checkpoint (the run's checkpoints/ keeps step-N.pt and best.pt; "
                        "`--resume auto` falls back to the newest one that loads by itself).");
}

// Where an EOCD sits: right at the end (no comment), or kSealSize before it (our comment).
std::size_t find_eocd(const unsigned char* p, std::size_t size, bool sealed) {
  const std::size_t comment = sealed ? kSealSize : 0;
  if (size < kEocdSize + comment) return std::string::npos;
  const std::size_t at = size - comment - kEocdSize;
  if (u32(p + at) != kEocdSignature || u16(p + at + 20) != comment) return std::string::npos;
  return at;
}

// Zip64 values of one central-directory entry, in the order the spec lists them.
bool read_zip64_extra(const unsigned char* extra, std::size_t length, bool need_uncompressed, bool need_compressed,
                      bool need_offset, uint64_t& uncompressed, uint64_t& compressed, uint64_t& offset) {
  for (std::size_t at = 0; at + 4 <= length;) {
    const uint16_t id = u16(extra + at), size = u16(extra + at + 2);
    if (at + 4 + size > length) return false;
    if (id == 0x0001) {
      std::size_t field = at + 4;
      const std::size_t end = field + size;
      auto take = [&](bool need, uint64_t& value) {
        if (!need) return true;
        if (field + 8 > end) return false;
        value = u64(extra + field);
        field += 8;
        return true;
      };
      return take(need_uncompressed, uncompressed) && take(need_compressed, compressed) && take(need_offset, offset);
    }
    at += 4 + size;
  }
  return false;
}

// Every central-directory entry and its stored data lie inside [0, cd_offset). Guards LibTorch's
// zip reader, which trusts these offsets.
void check_structure(const unsigned char* p, std::size_t size, std::size_t eocd, const std::string& name,
                     std::vector<ZipRecord>* records) {
  // A single-disk archive, as every writer of checkpoints produces (miniz refuses others).
  if (u16(p + eocd + 4) != 0 || u16(p + eocd + 6) != 0 || u16(p + eocd + 8) != u16(p + eocd + 10))
    damaged(name, "its zip end record describes a multi-disk archive");
  uint64_t entries = u16(p + eocd + 10), cd_size = u32(p + eocd + 12), cd_offset = u32(p + eocd + 16);
  std::size_t cd_limit = eocd; // the central directory ends before the (zip64) end records
  if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    if (eocd < 20 || u32(p + eocd - 20) != kZip64LocatorSignature) damaged(name, "its zip64 end locator is missing");
    const uint64_t z = u64(p + eocd - 20 + 8);
    if (z > eocd - 20 || eocd - 20 - z < 56 || u32(p + z) != kZip64EocdSignature)
      damaged(name, "its zip64 end record is out of place");
    entries = u64(p + z + 32);
    cd_size = u64(p + z + 40);
    cd_offset = u64(p + z + 48);
    cd_limit = static_cast<std::size_t>(z);
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) damaged(name, "its zip directory points outside the file");
  if (entries == 0) damaged(name, "its zip archive is empty");
  if (cd_size / 46 < entries) damaged(name, "its zip directory is too small for its entry count");
  std::size_t at = static_cast<std::size_t>(cd_offset);
  const std::size_t cd_end = static_cast<std::size_t>(cd_offset + cd_size);
  for (uint64_t i = 0; i < entries; ++i) {
    if (at + 46 > cd_end || u32(p + at) != kCentralSignature) damaged(name, "its zip directory entry " + std::to_string(i) + " is malformed");
    const uint16_t method = u16(p + at + 10);
    uint64_t compressed = u32(p + at + 20), uncompressed = u32(p + at + 24), local = u32(p + at + 42);
    const std::size_t name_length = u16(p + at + 28), extra_length = u16(p + at + 30), comment_length = u16(p + at + 32);
    const std::size_t next = at + 46 + name_length + extra_length + comment_length;
    if (next > cd_end) damaged(name, "its zip directory entry " + std::to_string(i) + " runs past the directory");
    const bool zu = uncompressed == 0xffffffff, zc = compressed == 0xffffffff, zo = local == 0xffffffff;
    if ((zu || zc || zo) &&
        !read_zip64_extra(p + at + 46 + name_length, extra_length, zu, zc, zo, uncompressed, compressed, local))
      damaged(name, "its zip directory entry " + std::to_string(i) + " lacks its zip64 sizes");
    // PyTorch stores records uncompressed (so tensors can be memory-mapped); anything else is not ours.
    if (method != 0 || compressed != uncompressed) damaged(name, "zip record " + std::to_string(i) + " is compressed");
    // Encrypted (bits 0, 6, 13) or patch data (bit 5): LibTorch's reader throws from its
    // constructor on these and leaks its zip state (found by the checkpoint fuzzer, torch 2.13).
    if ((u16(p + at + 8) & 0x2061u) != 0) damaged(name, "zip record " + std::to_string(i) + " is flagged encrypted");
    if (local > cd_offset || cd_offset - local < 30 || u32(p + local) != kLocalSignature)
      damaged(name, "zip record " + std::to_string(i) + " has no local header where the directory says");
    const uint64_t data = local + 30 + u16(p + local + 26) + u16(p + local + 28);
    if (data > cd_offset || compressed > cd_offset - data)
      damaged(name, "zip record " + std::to_string(i) + " runs past the end of the data (truncated?)");
    if (records != nullptr)
      records->push_back({std::string(reinterpret_cast<const char*>(p + at + 46), name_length),
                          static_cast<std::size_t>(data), static_cast<std::size_t>(compressed)});
    at = next;
  }
  (void)size;
}

}  // namespace

void CheckpointSealer::pass_on(const char* bytes, std::size_t size) {
  if (size == 0) return;
  crc_ = crc32c(bytes, size, crc_);
  sink_(bytes, size);
}

void CheckpointSealer::write(const char* bytes, std::size_t size) {
  if (size >= kEocdSize) {
    pass_on(tail_.data(), tail_.size());
    pass_on(bytes, size - kEocdSize);
    tail_.assign(bytes + size - kEocdSize, bytes + size);
    return;
  }
  tail_.insert(tail_.end(), bytes, bytes + size);
  if (tail_.size() > kEocdSize) {
    const std::size_t surplus = tail_.size() - kEocdSize;
    pass_on(tail_.data(), surplus);
    tail_.erase(tail_.begin(), tail_.begin() + static_cast<std::ptrdiff_t>(surplus));
  }
}

void CheckpointSealer::finish() {
  const auto* p = reinterpret_cast<const unsigned char*>(tail_.data());
  TP_CHECK(find_eocd(p, tail_.size(), /*sealed=*/false) == 0,
           "seal_checkpoint: the archive does not end with a plain zip end record");
  tail_[20] = static_cast<char>(kSealSize & 0xff); // comment length, little-endian
  tail_[21] = static_cast<char>(kSealSize >> 8);
  pass_on(tail_.data(), tail_.size());
  tail_.clear();
  char seal[kSealSize + 1];
  std::snprintf(seal, sizeof seal, "%s%08x", kSealPrefix, crc_);
  sink_(seal, kSealSize);
}

void seal_checkpoint(std::vector<char>& zip) {
  std::vector<char> sealed;
  sealed.reserve(zip.size() + kSealSize);
  CheckpointSealer sealer([&](const char* bytes, std::size_t size) { sealed.insert(sealed.end(), bytes, bytes + size); });
  sealer.write(zip.data(), zip.size());
  sealer.finish();
  zip.swap(sealed);
}

SealState verify_checkpoint(const char* bytes, std::size_t size, const std::string& name,
                            std::vector<ZipRecord>* records) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes);
  if (size == 0) damaged(name, "the file is empty (a crash or a full disk while it was copied?)");
  const bool sealed = size >= kSealSize && std::memcmp(bytes + size - kSealSize, kSealPrefix, kSealPrefixSize) == 0;
  const std::size_t eocd = find_eocd(p, size, sealed);
  if (eocd == std::string::npos)
    damaged(name, "it does not end with a zip end record (" + std::to_string(size) +
                      " bytes; truncated, or not a torchhost checkpoint)");
  if (sealed) {
    unsigned stored = 0;
    const std::string hex(bytes + size - 8, 8);
    if (hex.find_first_not_of("0123456789abcdef") != std::string::npos || std::sscanf(hex.c_str(), "%x", &stored) != 1)
      damaged(name, "its checksum field is not hexadecimal");
    const uint32_t actual = crc32c(bytes, size - kSealSize);
    if (actual != stored) {
      char detail[96];
      std::snprintf(detail, sizeof detail, "its CRC-32C is %08x but %08x was recorded when it was written", actual, stored);
      damaged(name, std::string(detail) + " (changed on disk: a flipped bit or a partial overwrite)");
    }
  }
  check_structure(p, size, eocd, name, records);
  return sealed ? SealState::kSealed : SealState::kLegacy;
}

}  // namespace tp
