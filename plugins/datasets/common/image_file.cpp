#include "image_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "regular_input.h"
#include "tp/cpp/guard.h"

namespace tp::datasets {
namespace {

/// A JPEG (it starts with SOI, FF D8 FF) whose last scan (SOS, FF DA) has no EOI (FF D9) after
/// it: cut short. libjpeg decodes such a file with a warning and grey rows where PIL refuses it.
/// Inside a scan FF is always followed by 00 or a restart marker, so neither marker can occur in
/// the entropy-coded data; a progressive JPEG has several scans, and the EOI follows the last.
bool jpeg_truncated(const std::vector<unsigned char>& bytes) {
  if (bytes.size() < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) return false;
  for (std::size_t i = bytes.size() - 1; i > 0; --i) {
    if (bytes[i - 1] != 0xFF) continue;
    if (bytes[i] == 0xD9) return false; // an EOI after every scan seen from the end
    if (bytes[i] == 0xDA) return true;  // the last scan, and no EOI after it
  }
  return true; // no scan at all: not a decodable JPEG either way
}

uint32_t big_endian32(const unsigned char* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) | p[3];
}
uint32_t little_endian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

/// PNG: the signature, then IHDR first, its width and height big-endian at bytes 16 and 20.
DeclaredSize png_size(const unsigned char* d, std::size_t size) {
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size < 24 || std::memcmp(d, kSignature, 8) != 0 || std::memcmp(d + 12, "IHDR", 4) != 0) return {};
  return {big_endian32(d + 16), big_endian32(d + 20)};
}

/// BMP: "BM", then the info header at byte 14: a 12-byte core header holds 16-bit sizes, a larger
/// one signed 32-bit sizes (a negative height is a top-down bitmap).
DeclaredSize bmp_size(const unsigned char* d, std::size_t size) {
  if (size < 26 || d[0] != 'B' || d[1] != 'M') return {};
  if (little_endian(d + 14, 4) == 12) return {little_endian(d + 18, 2), little_endian(d + 20, 2)};
  const auto width = static_cast<int32_t>(little_endian(d + 18, 4));
  const auto height = static_cast<int32_t>(little_endian(d + 22, 4));
  return {std::abs(static_cast<int64_t>(width)), std::abs(static_cast<int64_t>(height))};
}

/// WebP: "RIFF" <size> "WEBP", then the first chunk at byte 12: VP8X (extended: the canvas, 24-bit
/// width - 1 and height - 1 at 24 and 27), VP8L (lossless: 14-bit width - 1 and height - 1 after the
/// 0x2F signature byte at 20) or "VP8 " (lossy: the key frame's 14-bit sizes at 26 and 28).
DeclaredSize webp_size(const unsigned char* d, std::size_t size) {
  if (size < 30 || std::memcmp(d, "RIFF", 4) != 0 || std::memcmp(d + 8, "WEBP", 4) != 0) return {};
  if (std::memcmp(d + 12, "VP8X", 4) == 0) return {little_endian(d + 24, 3) + 1, little_endian(d + 27, 3) + 1};
  if (std::memcmp(d + 12, "VP8L", 4) == 0 && d[20] == 0x2F) {
    const uint32_t bits = little_endian(d + 21, 4);
    return {(bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
  }
  if (std::memcmp(d + 12, "VP8 ", 4) == 0 && d[23] == 0x9D && d[24] == 0x01 && d[25] == 0x2A)
    return {little_endian(d + 26, 2) & 0x3FFF, little_endian(d + 28, 2) & 0x3FFF};
  return {};
}

/// Netpbm (P1 to P6, PF, Pf): the two letters, then the width and the height as decimal text, each
/// after white space and any `#` comment lines (PAM's P7 keeps them in named header lines: not read).
DeclaredSize netpbm_size(const unsigned char* d, std::size_t size) {
  if (size < 3 || d[0] != 'P' || !((d[1] >= '1' && d[1] <= '6') || d[1] == 'F' || d[1] == 'f')) return {};
  std::size_t at = 2;
  const auto number = [&]() -> int64_t {
    while (at < size && (std::isspace(d[at]) != 0 || d[at] == '#')) {
      if (d[at] == '#')
        while (at < size && d[at] != '\n' && d[at] != '\r') ++at;
      else
        ++at;
    }
    int64_t value = 0;
    std::size_t digits = 0;
    for (; at < size && std::isdigit(d[at]) != 0 && digits < 10; ++at, ++digits) value = value * 10 + (d[at] - '0');
    return digits > 0 ? value : 0;
  };
  const int64_t width = number();
  const int64_t height = number();
  return {width, height};
}

/// TIFF (classic, either byte order): the first image file directory's ImageWidth (tag 256) and
/// ImageLength (257), each a SHORT or a LONG; the page OpenCV decodes.
DeclaredSize tiff_size(const unsigned char* d, std::size_t size) {
  if (size < 8) return {};
  const bool little = d[0] == 'I' && d[1] == 'I';
  if (!little && !(d[0] == 'M' && d[1] == 'M')) return {};
  const auto read = [&](std::size_t at, int bytes) -> uint32_t {
    uint32_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= static_cast<uint32_t>(d[at + static_cast<std::size_t>(k)])
                                         << (8 * (little ? k : bytes - 1 - k));
    return v;
  };
  if (read(2, 2) != 42) return {};
  const std::size_t directory = read(4, 4);
  if (directory > size - 2) return {};
  const std::size_t entries = read(directory, 2);
  DeclaredSize declared;
  for (std::size_t i = 0; i < entries && directory + 2 + 12 * (i + 1) <= size; ++i) {
    const std::size_t entry = directory + 2 + 12 * i;
    const uint32_t tag = read(entry, 2), type = read(entry + 2, 2);
    if ((tag != 256 && tag != 257) || (type != 3 && type != 4)) continue;
    const int64_t value = type == 3 ? read(entry + 8, 2) : read(entry + 8, 4);
    (tag == 256 ? declared.width : declared.height) = value;
  }
  return declared;
}

/// One image format's signature: `bytes` at `offset` of the file's start.
struct Signature {
  const char* format;
  std::size_t offset;
  std::string_view bytes;
};

/// The signatures OpenCV's imdecode tells its decoders by (each decoder's checkSignature), so a
/// file any of them would read passes, whichever codecs the OpenCV at hand was built with: wider
/// than the four formats the datasets document, because a check made without decoding must never
/// refuse what training would read. The netpbm family (P1 to P7, PF, Pf) is told apart by the
/// white space after its two letters, as OpenCV's PxM, PAM and PFM decoders do.
constexpr Signature kSignatures[] = {
    {"JPEG", 0, std::string_view("\xFF\xD8\xFF", 3)},
    {"PNG", 0, std::string_view("\x89PNG\r\n\x1A\n", 8)},
    {"BMP", 0, "BM"},
    {"WebP", 8, "WEBP"},  // after "RIFF" and a size, checked below
    {"TIFF", 0, std::string_view("II*\0", 4)},
    {"TIFF", 0, std::string_view("MM\0*", 4)},
    {"BigTIFF", 0, std::string_view("II+\0", 4)},
    {"BigTIFF", 0, std::string_view("MM\0+", 4)},
    {"JPEG 2000", 0, std::string_view("\0\0\0\x0CjP  \r\n\x87\n", 12)},
    {"JPEG 2000", 0, std::string_view("\xFF\x4F\xFF\x51", 4)},
    {"JPEG XL", 0, std::string_view("\xFF\x0A", 2)},
    {"JPEG XL", 0, std::string_view("\0\0\0\x0CJXL \r\n\x87\n", 12)},
    {"Sun raster", 0, std::string_view("\x59\xA6\x6A\x95", 4)},
    {"OpenEXR", 0, std::string_view("\x76\x2F\x31\x01", 4)},
    {"Radiance HDR", 0, "#?RADIANCE"},
    {"Radiance HDR", 0, "#?RGBE"},
    {"GIF", 0, "GIF87a"},
    {"GIF", 0, "GIF89a"},
    {"AVIF", 4, "ftypavi"},  // "ftypavif" or "ftypavis" after the box size
};

}  // namespace

const char* image_format(const unsigned char* data, std::size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  for (const Signature& s : kSignatures) {
    if (head.size() < s.offset + s.bytes.size() || head.substr(s.offset, s.bytes.size()) != s.bytes) continue;
    if (std::string_view(s.format) == "WebP" && head.substr(0, 4) != "RIFF") continue;
    return s.format;
  }
  const auto space = [&](std::size_t at) { return at < size && std::isspace(data[at]) != 0; };
  if (size >= 3 && data[0] == 'P' && ((data[1] >= '1' && data[1] <= '7') || data[1] == 'F' || data[1] == 'f') &&
      space(2))
    return "netpbm";
  return nullptr;
}

bool jpeg_size(const unsigned char* data, std::size_t size, int* out_h, int* out_w) {
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return false;
  std::size_t i = 2;
  while (i + 4 <= size) {
    if (data[i] != 0xFF) return false;
    const unsigned char marker = data[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      i += 2;  // markers without a length
      continue;
    }
    const std::size_t length = (static_cast<std::size_t>(data[i + 2]) << 8) | data[i + 3];
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (i + 9 > size) return false;
      *out_h = (data[i + 5] << 8) | data[i + 6];
      *out_w = (data[i + 7] << 8) | data[i + 8];
      return *out_h > 0 && *out_w > 0;
    }
    if (marker == 0xDA || length < 2) return false;  // scan data before any SOF: give up
    i += 2 + length;
  }
  return false;
}

DeclaredSize declared_size(const unsigned char* data, std::size_t size) {
  int height = 0, width = 0;
  if (jpeg_size(data, size, &height, &width)) return {width, height};
  for (auto read : {&png_size, &bmp_size, &webp_size, &netpbm_size, &tiff_size}) {
    const DeclaredSize declared = read(data, size);
    if (declared.width > 0 && declared.height > 0) return declared;
  }
  return {};
}

std::string truncation_of(const unsigned char* data, std::size_t size) {
  const char* format = image_format(data, size);
  if (format == nullptr) return "";
  const auto le32 = [&](std::size_t at) {
    return static_cast<uint32_t>(data[at]) | static_cast<uint32_t>(data[at + 1]) << 8 |
           static_cast<uint32_t>(data[at + 2]) << 16 | static_cast<uint32_t>(data[at + 3]) << 24;
  };
  if (std::string_view(format) == "PNG") {
    // Chunks: 4-byte big-endian length, 4-byte type, data, 4-byte CRC; the image ends at IEND.
    std::size_t at = 8;
    while (at < size) {
      if (size - at < 12) return "its last chunk is cut short";
      const uint32_t length = static_cast<uint32_t>(data[at]) << 24 | static_cast<uint32_t>(data[at + 1]) << 16 |
                              static_cast<uint32_t>(data[at + 2]) << 8 | static_cast<uint32_t>(data[at + 3]);
      const std::string type(reinterpret_cast<const char*>(data + at + 4), 4);
      const bool named = std::all_of(type.begin(), type.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
      if (!named) return "";  // not a chunk: damaged in a way the decoder names better
      if (length > size - at - 12) return "its " + type + " chunk is cut short";
      if (type == "IEND") return "";
      at += 12 + std::size_t{length};
    }
    return "it ends without its IEND chunk";
  }
  if (std::string_view(format) == "BMP" && size >= 34 && le32(14) >= 40) {
    // Uncompressed (BI_RGB) only: its rows take a size the header fixes.
    const auto width = static_cast<int32_t>(le32(18)), height = static_cast<int32_t>(le32(22));
    const uint32_t bits = static_cast<uint32_t>(data[28]) | static_cast<uint32_t>(data[29]) << 8;
    if (le32(30) != 0 || width <= 0 || height == 0 || (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32))
      return "";
    const uint64_t stride = (static_cast<uint64_t>(width) * bits + 31) / 32 * 4;
    const uint64_t rows = height < 0 ? 0 - static_cast<uint64_t>(static_cast<int64_t>(height)) : static_cast<uint64_t>(height);
    if (static_cast<uint64_t>(le32(10)) + stride * rows > size)
      return "it holds " + std::to_string(size) + " bytes, fewer than the " +
             std::to_string(static_cast<uint64_t>(le32(10)) + stride * rows) + " its header's rows need";
  }
  return "";
}

void refuse_oversized(int64_t width, int64_t height, int64_t max_pixels, const std::string& path, const char* component) {
  // width <= max / height, not width * height <= max: two 32-bit header fields overflow int64.
  if (max_pixels <= 0 || width <= 0 || height <= 0 || width <= max_pixels / height) return;
  const uint64_t pixels = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);
  throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + path + "' declares " + std::to_string(width) +
                                        " x " + std::to_string(height) + " = " + std::to_string(pixels) +
                                        " pixels, more than max_image_pixels = " + std::to_string(max_pixels) +
                                        " (a decompression bomb, or an image far larger than training needs): it "
                                        "is not decoded. Shrink the file, or raise max_image_pixels (0: no limit) if "
                                        "the image is real");
}

std::string escapes_root(const std::string& name) {
  const std::filesystem::path path(name);
  if (path.is_absolute()) return "is absolute";
  int depth = 0;
  for (const auto& part : path.lexically_normal()) {
    if (part == "..") --depth;
    else if (part != "." && !part.empty()) ++depth;
    if (depth < 0) return "climbs out of it with '..'";
  }
  return "";
}

std::vector<unsigned char> read_image_file(const std::string& path, const char* component, int64_t max_pixels,
                                           uint64_t max_bytes) {
  using tp::cpp::Failure;
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Failure(TP_ERR_IO, std::string(component) + ": cannot open '" + path + "': " + std::strerror(errno));
  const std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    throw Failure(TP_ERR_IO, std::string(component) + ": cannot read '" + path + "': " + std::strerror(errno));
  // A FIFO would hang the loader, /dev/zero fill memory, a directory read as nothing: only regular
  // files hold images.
  if (!S_ISREG(info.st_mode))
    throw Failure(TP_ERR_IO, std::string(component) + ": '" + path + "' is " + file_kind(info.st_mode) +
                                 ", not a regular file; samples are read from regular files only. Fix the listing "
                                 "or replace it with the image file");
  // Before the allocation: a sparse file of 64 GB costs no disk but would cost its size here.
  if (max_bytes > 0 && static_cast<uint64_t>(info.st_size) > max_bytes)
    throw Failure(TP_ERR_IO, std::string(component) + ": '" + path + "' holds " + std::to_string(info.st_size) +
                                 " bytes, more than the " + std::to_string(max_bytes) +
                                 " an image file may hold here; it is not read. Fix the listing or replace it with "
                                 "the image file");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Failure(TP_ERR_IO, std::string(component) + ": cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break; // shrunk while being read: what is there is decoded (and refused if cut)
    filled += static_cast<std::size_t>(n);
  }
  bytes.resize(filled);
  check_image_bytes(bytes, path, component, max_pixels);
  return bytes;
}

std::string apple_double_note(const std::vector<unsigned char>& bytes, const std::string& name) {
  static constexpr unsigned char kSignature[] = {0x00, 0x05, 0x16, 0x07};
  const bool signature = bytes.size() >= 4 && std::equal(std::begin(kSignature), std::end(kSignature), bytes.begin());
  const std::size_t slash = name.find_last_of('/');
  const bool dot_underscore = name.compare(slash == std::string::npos ? 0 : slash + 1, 2, "._") == 0;
  if (!signature && !dot_underscore) return "";
  return std::string("it is a macOS AppleDouble file (") +
         (signature ? "its first bytes are 00 05 16 07" : "named ._<name>") +
         "), the metadata macOS writes beside each file it copies to a disk or share without its extended "
         "attributes, not an image; remove the ._* files (find <root> -name '._*' -delete; copy with "
         "COPYFILE_DISABLE=1 or zip -x '._*' to leave them out)";
}

void check_image_format(const std::vector<unsigned char>& bytes, const std::string& name, const char* component) {
  // The words decode_bgr uses for an empty file, so a file reads the same refused here or there.
  if (bytes.empty())
    throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + name +
                                          "' is empty (0 bytes), not an image; fix or remove the file");
  if (image_format(bytes.data(), bytes.size()) != nullptr) return;
  if (const std::string note = apple_double_note(bytes, name); !note.empty())
    throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + name + "' is not an image: " + note);
  std::string head;
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 8); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%02X", bytes[i]);
    head += (i == 0 ? "" : " ") + std::string(hex);
  }
  throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + name + "' is not an image: it begins with " +
                                        head + ", the signature of no image format the decoders read (JPEG, PNG, "
                                        "BMP, WebP, TIFF, ...): a text file or a web page saved under an image's "
                                        "name, say; fix or remove the file");
}

void check_image_bytes(const std::vector<unsigned char>& bytes, const std::string& name, const char* component,
                       int64_t max_pixels) {
  if (jpeg_truncated(bytes))
    throw tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": '" + name +
                                          "' is a truncated JPEG (no end-of-image marker after its last scan: the "
                                          "file was cut, as an interrupted copy or download leaves it); fix or remove "
                                          "the file");
  const DeclaredSize declared = declared_size(bytes.data(), bytes.size());
  refuse_oversized(declared.width, declared.height, max_pixels, name, component);
}

}  // namespace tp::datasets
