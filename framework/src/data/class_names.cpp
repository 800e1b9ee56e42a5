#include "tp/framework/data/class_names.h"

#include <cstdint>
#include <cstdio>

#include "tp/framework/error.h"

namespace tp {
namespace {

// The code point of the UTF-8 sequence at `text[i]`, advancing `i` past it; -1 for a malformed
// sequence (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, a
// value above U+10FFFF), which a shortest-form decoder must refuse (Unicode 15, table 3-7).
int32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return text[i++];
  const int length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (length == 0 || lead > 0xF4 || i + length > text.size()) return -1;
  int32_t code = lead & (0xFF >> (length + 1));
  for (int k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return -1;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr int32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return -1;
  i += length;
  return code;
}

}  // namespace

std::string class_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxClassNameBytes)
    return "is longer than " + std::to_string(kMaxClassNameBytes) + " bytes";
  for (std::size_t i = 0; i < name.size();) {
    const std::size_t at = i;
    const int32_t code = next_code_point(name, i);
    if (code < 0) return "is not valid UTF-8 (byte " + std::to_string(at) + ")";
    if (code < 0x20 || (code >= 0x7F && code <= 0x9F))
      return "holds the control character U+" + [&] {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(code));
        return std::string(hex);
      }() + " (byte " + std::to_string(at) + ")";
  }
  return "";
}

void check_class_names(const ClassNames& classes) {
  TP_CHECK(!classes.field.empty(), "the names of ", classes.names.size(), " classes name no label field");
  TP_CHECK(classes.names.size() <= kMaxClassNames, classes.names.size(), " class names (at most ", kMaxClassNames, ")");
  for (std::size_t id = 0; id < classes.names.size(); ++id)
    if (const std::string problem = class_name_problem(classes.names[id]); !problem.empty())
      throw Error("the name of class " + std::to_string(id) + " of field '" + classes.field + "' " + problem);
}

std::string class_count_problem(const ClassNames& classes, const std::vector<FieldContract>& contracts) {
  for (const FieldContract& contract : contracts)
    if (!classes.empty() && contract.kind == FieldContract::Kind::kClassIds && contract.field == classes.field &&
        contract.class_count > 0 && static_cast<int64_t>(classes.names.size()) != contract.class_count)
      return std::to_string(classes.names.size()) + " class names for field '" + classes.field + "', which the loss " +
             "declares to hold " + std::to_string(contract.class_count) + " classes";
  return "";
}

}  // namespace tp
