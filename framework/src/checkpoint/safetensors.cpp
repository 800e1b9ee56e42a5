#include "tp/framework/checkpoint/safetensors.h"

#include <ATen/ATen.h>

#include <cstring>
#include <sstream>

#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"

namespace tp {
namespace {

const char* dtype_code(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "F32";
    case at::kDouble: return "F64";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kLong: return "I64";
    case at::kInt: return "I32";
    case at::kShort: return "I16";
    case at::kChar: return "I8";
    case at::kByte: return "U8";
    case at::kBool: return "BOOL";
    default: throw Error(std::string("safetensors has no dtype code for ") + c10::toString(type));
  }
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

}  // namespace tp
