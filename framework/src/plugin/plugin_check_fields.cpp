#include "plugin_check_fields.h"

#include <c10/util/ArrayRef.h>
#include <c10/util/StringUtil.h>

namespace tp::detail {

std::string dtype_text(const DLDataType& t) {
  std::string name;
  switch (t.code) {
    case kDLInt: name = "int"; break;
    case kDLUInt: name = "uint"; break;
    case kDLFloat: name = "float"; break;
    case kDLBfloat: name = "bfloat"; break;
    default: name = "code" + std::to_string(t.code) + "_"; break;
  }
  name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

std::string FieldShape::text() const { return name + " " + dtype_text(dtype) + c10::str(c10::IntArrayRef(shape)); }

FieldShape as_declared(FieldShape field, const BatchLayout& layout) {
  if (const FieldBatching* f = layout.find(field.name))
    for (std::size_t d = 0; d < field.shape.size(); ++d)
      if (f->batching == Batching::kPad || d == 0) field.shape[d] = -1;
  return field;
}

std::vector<FieldShape> as_declared(std::vector<FieldShape> fields, const BatchLayout& layout) {
  for (FieldShape& f : fields) f = as_declared(std::move(f), layout);
  return fields;
}

std::string fields_text(const std::vector<FieldShape>& fields, const BatchLayout& layout) {
  std::string text;
  for (const FieldShape& f : fields) {
    std::string one = f.text();
    if (const FieldBatching* declared = layout.find(f.name)) {
      // "[-1, 4]" reads as a shape; "[*, 4]" reads as "any size here".
      std::string shape = "[";
      for (std::size_t d = 0; d < f.shape.size(); ++d)
        shape += (d ? ", " : "") + (f.shape[d] < 0 ? std::string("*") : std::to_string(f.shape[d]));
      one = f.name + " " + dtype_text(f.dtype) + shape + "]" +
            (declared->batching == Batching::kPad ? " (pad " + c10::str(declared->pad_value) + ")" : " (ragged)");
    }
    text += (text.empty() ? "" : ", ") + one;
  }
  return text.empty() ? "no fields" : text;
}

}  // namespace tp::detail
