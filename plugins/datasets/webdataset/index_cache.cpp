#include "index_cache.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cache_dir.h"
#include "exclusive_file.h"
#include "stable_hash.h"
#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

namespace fs = std::filesystem;
namespace ds = tp::datasets;
using tp::cpp::Failure;
constexpr const char* kCacheMagic = "torchhost webdataset index 1";
constexpr uint64_t kTarBlock = 512;

std::string shard_identity(const std::string& shard_path) {
  return fs::absolute(shard_path).lexically_normal().string();
}

// The cache is line- and field-oriented: every byte that could end a field (controls, space,
// ',', DEL) and '%' itself is written %XX, so any key a tar can hold round-trips.
bool must_escape(unsigned char c) { return c <= 0x20 || c == 0x7F || c == '%' || c == ','; }

std::string escaped(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (must_escape(c)) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The field `text` unescaped; false on a raw byte that must be escaped, a malformed escape, or
// an escaped NUL (no tar name holds one).
bool unescaped(const std::string& text, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c != '%') {
      if (must_escape(c)) return false;
      *out += static_cast<char>(c);
      continue;
    }
    if (i + 2 >= text.size()) return false;  // '%' needs two hex digits after it
    const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// A count or offset: digits only (no sign, no spaces), at most 18 of them.
bool parse_number(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoull(text);
  return true;
}

// Reads the lines of a text one by one; each must end with '\n'.
class LineReader {
 public:
  explicit LineReader(const std::string& text) : text_(text) {}
  bool next(std::string* line) {
    const std::size_t end = text_.find('\n', at_);
    if (end == std::string::npos) return false;
    line->assign(text_, at_, end - at_);
    at_ = end + 1;
    return true;
  }
  bool done() const { return at_ == text_.size(); }

 private:
  const std::string& text_;
  std::size_t at_ = 0;
};

// One sample line: "<offset> <ext>,<ext>... <key>", each field escaped.
bool parse_sample(const std::string& line, IndexedSample* out) {
  const std::size_t first = line.find(' ');
  const std::size_t second = first == std::string::npos ? first : line.find(' ', first + 1);
  if (second == std::string::npos || line.find(' ', second + 1) != std::string::npos) return false;
  if (!parse_number(line.substr(0, first), &out->offset)) return false;
  if (!unescaped(line.substr(second + 1), &out->key)) return false;
  // A key as split_member_name makes it: non-empty, and its basename non-empty without a '.'.
  const std::size_t slash = out->key.rfind('/');
  const std::string base = slash == std::string::npos ? out->key : out->key.substr(slash + 1);
  if (base.empty() || base.find('.') != std::string::npos) return false;
  const std::string exts = line.substr(first + 1, second - first - 1);
  out->extensions.clear();
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = exts.find(',', from);
    std::string ext;
    if (!unescaped(exts.substr(from, comma == std::string::npos ? std::string::npos : comma - from), &ext))
      return false;
    const bool lower = std::none_of(ext.begin(), ext.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    if (ext.empty() || ext.find('/') != std::string::npos || !lower ||
        std::find(out->extensions.begin(), out->extensions.end(), ext) != out->extensions.end())
      return false;
    out->extensions.push_back(std::move(ext));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return true;
}

[[noreturn]] void cache_write_failed(const std::string& why, const std::string& cache_path,
                                     const std::string& shard_path) {
  throw Failure(TP_ERR_IO, "webdataset: cannot write the shard index cache '" + cache_path + "' for shard '" +
                               shard_path + "' (" + why + "); set `cache_dir` to a writable directory or `cache = false`");
}

}  // namespace

std::string index_cache_path(const std::string& cache_dir, const std::string& shard_path) {
  char name[64];
  std::snprintf(name, sizeof name, "webdataset-%016llx.index",
                static_cast<unsigned long long>(datasets::fnv1a_64(shard_identity(shard_path))));
  return (fs::path(cache_dir) / name).string();
}

std::optional<ShardIndex> parse_index_cache(const std::string& text, const std::string& shard_path,
                                            uint64_t file_size, int64_t mtime_ns) {
  LineReader lines(text);
  std::string line;
  if (!lines.next(&line) || line != kCacheMagic) return std::nullopt;
  if (!lines.next(&line) || line != escaped(shard_identity(shard_path))) return std::nullopt;
  if (!lines.next(&line) || line != std::to_string(file_size) + ' ' + std::to_string(mtime_ns)) return std::nullopt;
  uint64_t count = 0;
  // Every sample has a header of its own: a file of n bytes holds at most n / 512 of them, so a
  // claimed count is bounded by the shard before anything is reserved for it.
  if (!lines.next(&line) || !parse_number(line, &count) || count > file_size / kTarBlock) return std::nullopt;
  ShardIndex index;
  index.file_size = file_size;
  index.mtime_ns = mtime_ns;
  index.samples.reserve(static_cast<std::size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    IndexedSample sample;
    if (!lines.next(&line) || !parse_sample(line, &sample)) return std::nullopt;
    if (sample.offset % kTarBlock != 0 || sample.offset + kTarBlock > file_size) return std::nullopt;
    if (!index.samples.empty()) {
      const IndexedSample& before = index.samples.back();
      if (sample.offset <= before.offset) return std::nullopt;
      // The scan starts a sample with the same key only on a repeated extension.
      if (sample.key == before.key && std::find(before.extensions.begin(), before.extensions.end(),
                                                sample.extensions.front()) == before.extensions.end())
        return std::nullopt;
    }
    index.samples.push_back(std::move(sample));
  }
  if (!lines.done()) return std::nullopt;
  return index;
}

std::optional<ShardIndex> read_index_cache(const std::string& cache_path, const std::string& shard_path,
                                           uint64_t file_size, int64_t mtime_ns) {
  // Never through a planted link, never blocking on a planted FIFO, never from a directory or a
  // file others can write (read_cache_file): only a regular file is read.
  // A line per sample of at most a few times its member names, which the shard itself holds:
  // anything larger than this bound is not a cache a scan wrote, and is not read into memory.
  const std::optional<std::string> text = ds::read_cache_file(cache_path, 4 * file_size + 65536);
  if (!text) return std::nullopt;
  return parse_index_cache(*text, shard_path, file_size, mtime_ns);
}

std::string format_index_cache(const std::string& shard_path, const ShardIndex& index) {
  std::string text = std::string(kCacheMagic) + '\n' + escaped(shard_identity(shard_path)) + '\n' +
                     std::to_string(index.file_size) + ' ' + std::to_string(index.mtime_ns) + '\n' +
                     std::to_string(index.samples.size()) + '\n';
  for (const IndexedSample& sample : index.samples) {
    text += std::to_string(sample.offset);
    text += ' ';
    for (std::size_t k = 0; k < sample.extensions.size(); ++k) {
      if (k > 0) text += ',';
      text += escaped(sample.extensions[k]);
    }
    text += ' ';
    text += escaped(sample.key);
    text += '\n';
  }
  return text;
}

void write_index_cache(const std::string& cache_path, const std::string& shard_path, const ShardIndex& index) {
  std::error_code ec;
  fs::create_directories(fs::path(cache_path).parent_path(), ec);
  const std::string text = format_index_cache(shard_path, index);
  // Exclusively, under a name no one can plant a link at: the directory may be a team's.
  const std::string why = ds::replace_file_exclusively(cache_path, text);
  if (!why.empty()) cache_write_failed(why, cache_path, shard_path);
}

}  // namespace tp::webdataset
