#include "tp/framework/checkpoint/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string_view>

#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"

namespace tp {
namespace {

// The dtypes both directions support, with the format's code for each.
struct DtypeCode {
  at::ScalarType type;
  const char* code;
};
constexpr DtypeCode kDtypeCodes[] = {
    {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"}, {at::kLong, "I64"},
    {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},  {at::kByte, "U8"},       {at::kBool, "BOOL"}};

const char* dtype_code(at::ScalarType type) {
  for (const DtypeCode& d : kDtypeCodes)
    if (d.type == type) return d.code;
  throw Error(std::string("safetensors has no dtype code for ") + c10::toString(type));
}

at::ScalarType dtype_of(const std::string& code) {
  for (const DtypeCode& d : kDtypeCodes)
    if (code == d.code) return d.type;
  throw Error("unsupported safetensors dtype \"" + code + "\"");
}

// Names and metadata are ours or plugin-chosen parameter names: escape what JSON requires.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The header is JSON: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
// "__metadata__": {...}}. This reads exactly that shape; anything else is skipped or refused.

class HeaderReader {
 public:
  explicit HeaderReader(const std::string& text) : s_(text) {}

  /// name -> (dtype, shape, offsets) for every tensor entry.
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape, offsets;
  };
  std::vector<std::pair<std::string, Entry>> entries() {
    std::vector<std::pair<std::string, Entry>> out;
    expect('{');
    for (bool more = !peek('}'); more; more = next_member('}')) {
      std::string name = string();
      expect(':');
      if (name == "__metadata__") {
        skip_value();
        continue;
      }
      Entry e;
      expect('{');
      for (bool field = !peek('}'); field; field = next_member('}')) {
        const std::string key = string();
        expect(':');
        if (key == "dtype") e.dtype = string();
        else if (key == "shape") e.shape = ints();
        else if (key == "data_offsets") e.offsets = ints();
        else skip_value();
      }
      out.emplace_back(std::move(name), std::move(e));
    }
    return out;
  }

 private:
  void space() { while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_; }
  bool peek(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!peek(c)) throw Error(std::string("malformed header: expected '") + c + "' at byte " + std::to_string(i_));
  }
  bool next_member(char close) {
    if (peek(',')) return true;
    expect(close);
    return false;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        c = s_[i_++];
        // Tensor names are plain ASCII in practice; \uXXXX outside ASCII is kept as its escape.
        if (c == 'u' && i_ + 4 <= s_.size()) {
          const long code = std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16);
          out += code < 0x80 ? std::string(1, static_cast<char>(code)) : "\\u" + s_.substr(i_, 4);
          i_ += 4;
          continue;
        }
        c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
      }
      out += c;
    }
    expect('"');
    return out;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> out;
    expect('[');
    for (bool more = !peek(']'); more; more = next_member(']')) {
      space();
      char* end = nullptr;
      out.push_back(std::strtoll(s_.c_str() + i_, &end, 10));
      if (end == s_.c_str() + i_) throw Error("malformed header: expected an integer at byte " + std::to_string(i_));
      i_ = static_cast<size_t>(end - s_.c_str());
    }
    return out;
  }
  /// Skips one JSON value. Nesting is followed with an explicit stack of closing brackets, never
  /// by recursion, and is capped at kMaxDepth: the header is attacker input (a file given to
  /// train.init_weights), and a recursive skip of "[[[[..." overflowed the stack (SIGSEGV).
  void skip_value() {
    std::string open; // the closing brackets of the containers still open, innermost last
    for (;;) {
      // 1. One value starts here: a string, a container, or a bare scalar (number, true, null).
      space();
      if (i_ < s_.size() && s_[i_] == '"') {
        string();
      } else if (peek('{') || peek('[')) {
        const char close = s_[i_ - 1] == '{' ? '}' : ']';
        if (!peek(close)) { // not empty: descend to its first value
          if (open.size() >= kMaxDepth)
            throw Error("malformed header: values nested deeper than " + std::to_string(kMaxDepth) + " at byte " +
                        std::to_string(i_));
          open.push_back(close);
          if (close == '}') {
            string();
            expect(':');
          }
          continue;
        }
      } else {
        const size_t start = i_;
        while (i_ < s_.size() && std::string_view(",}] \n\r\t").find(s_[i_]) == std::string_view::npos) ++i_;
        if (i_ == start) throw Error("malformed header: expected a value at byte " + std::to_string(i_));
      }
      // 2. A value is complete: go on to its next sibling, or close the containers it ends.
      for (;;) {
        if (open.empty()) return;
        if (peek(',')) {
          if (open.back() == '}') {
            string();
            expect(':');
          }
          break;
        }
        expect(open.back());
        open.pop_back();
      }
    }
  }

  /// Deeper than any real "__metadata__" (which holds strings only) and far below a stack's reach.
  static constexpr size_t kMaxDepth = 64;
  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> contiguous;
  std::ostringstream header;
  header << "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    header << (first ? "" : ",") << json_string(key) << ':' << json_string(value);
    first = false;
  }
  header << '}';
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    header << ',' << json_string(name) << ":{\"dtype\":\"" << dtype_code(t.scalar_type()) << "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) header << (d ? "," : "") << t.size(d);
    header << "],\"data_offsets\":[" << offset << ',' << offset + bytes << "]}";
    offset += bytes;
    contiguous.push_back(std::move(t));
  }
  header << '}';
  std::string head = header.str();
  head.append((8 - head.size() % 8) % 8, ' '); // the format aligns the data section to 8 bytes
  std::string file(8, '\0');
  const uint64_t head_size = head.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((head_size >> (8 * i)) & 0xff); // little-endian
  file += head;
  file.reserve(file.size() + static_cast<std::size_t>(offset));
  for (const auto& t : contiguous)
    file.append(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel() * t.element_size()));
  write_file_atomically(path, file);
}

namespace {

// The tensors' byte ranges must tile the data section, in some order, from its first byte to its
// last, as every writer lays them out (the safetensors library itself refuses anything else):
// overlapping ranges served one tensor's bytes as another's weights, a gap or trailing bytes are no
// writer's (security trial F15). Each range's own bounds are checked where it is read.
template <class Entries>
void refuse_untiled(const Entries& entries, uint64_t data_size) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& [name, e] : entries) ranges.emplace_back(e.offsets[0], e.offsets[1]);
  std::sort(ranges.begin(), ranges.end());
  int64_t end = 0;
  for (const auto& [begin, finish] : ranges) {
    if (begin != end)
      throw Error("its tensors' data_offsets " + std::string(begin < end ? "overlap" : "leave a gap") + " at byte " +
                  std::to_string(std::min(begin, end)) + " of the data");
    end = finish;
  }
  if (static_cast<uint64_t>(end) != data_size)
    throw Error("its tensors' data_offsets end at byte " + std::to_string(end) + " of " + std::to_string(data_size) +
                " of data: the rest belongs to no tensor");
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> read_safetensors(const std::vector<char>& bytes) {
  if (bytes.size() < 8) throw Error("shorter than the 8-byte header length");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_size > bytes.size() - 8) throw Error("its header length exceeds the file");
  const std::string header(bytes.data() + 8, header_size);
  const char* data = bytes.data() + 8 + header_size;
  const uint64_t data_size = bytes.size() - 8 - header_size;
  auto entries = HeaderReader(header).entries();
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& [name, e] : entries) {
    const at::ScalarType dtype = dtype_of(e.dtype);
    // Shape arithmetic on attacker input: every dimension non-negative, the element count and the
    // byte count checked against overflow (no signed overflow, no wrapped size).
    // The product of the non-zero dimensions bounds the strides LibTorch computes, even for a
    // zero-element tensor.
    uint64_t numel = 1, strides = 1;
    for (int64_t d : e.shape) {
      if (d < 0) throw Error("tensor '" + name + "' has a negative dimension in its shape");
      if (d != 0 && strides > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d))
        throw Error("tensor '" + name + "' has a shape whose element count overflows");
      if (d != 0) strides *= static_cast<uint64_t>(d);
      numel *= static_cast<uint64_t>(d);
    }
    const uint64_t element = c10::elementSize(dtype);
    if (numel > data_size / element + 1) throw Error("tensor '" + name + "' has a shape larger than the file's data");
    const uint64_t expected = numel * element;
    if (e.offsets.size() != 2 || e.offsets[0] < 0 || e.offsets[1] < e.offsets[0] ||
        static_cast<uint64_t>(e.offsets[1]) > data_size ||
        static_cast<uint64_t>(e.offsets[1] - e.offsets[0]) != expected)
      throw Error("tensor '" + name + "' has data_offsets that do not fit its shape and the file");
    // The memory format given, not left empty: LibTorch reads an empty optional's payload with a
    // conditional move, which valgrind reports on every tensor of every open (serving trial F5).
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(dtype), at::MemoryFormat::Contiguous);
    // A zero-element tensor has no storage to copy into (its data pointer may be null).
    if (expected > 0) std::memcpy(t.data_ptr(), data + e.offsets[0], expected); // little-endian, as the format is
    out.emplace_back(std::move(name), std::move(t));
  }
  refuse_untiled(entries, data_size);  // after each range's own checks, which name the tensor
  return out;
}

}  // namespace tp
