#include "tp/framework/data/class_names.h"

#include <cstdint>
#include <cstdio>

#include "tp/framework/error.h"
#include "tp/framework/util/utf8.h"

namespace tp {

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
