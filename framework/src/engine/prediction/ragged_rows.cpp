#include "ragged_rows.h"

#include <ATen/ATen.h>

#include "number_text.h"
#include "tp/framework/error.h"

namespace tp::detail {
namespace {

// Value `i` of a contiguous CPU tensor (int64, float64 or float32) as a JSON number.
void append_value(std::string& text, const at::Tensor& values, int64_t i) {
  if (values.scalar_type() == at::kLong) text += number_text(values.data_ptr<int64_t>()[i], "null");
  else if (values.scalar_type() == at::kDouble) text += number_text(values.data_ptr<double>()[i], "null");
  else text += number_text(values.data_ptr<float>()[i], "null");
}

// The values of `values` from `next` on as nested arrays of its shape from dimension `dim` on.
void append_nested(std::string& text, const at::Tensor& values, int64_t dim, int64_t& next) {
  if (dim == values.dim()) {
    append_value(text, values, next++);
    return;
  }
  text += '[';
  for (int64_t i = 0; i < values.size(dim); ++i) {
    if (i) text += ',';
    append_nested(text, values, dim + 1, next);
  }
  text += ']';
}

}  // namespace

void append_map_members(std::vector<std::string>& members, const std::string& name, const std::vector<at::Tensor>& maps) {
  TP_CHECK(members.size() == maps.size(), "predictions: ", maps.size(), " maps of '", name, "' for ", members.size(),
           " samples");
  for (std::size_t row = 0; row < maps.size(); ++row) {
    const at::Tensor& map = maps[row];
    const at::Tensor values = map.is_floating_point() ? (map.scalar_type() == at::kDouble ? map : map.to(at::kFloat))
                                                      : map.to(at::kLong);
    std::string& text = members[row];
    text += (text.empty() ? "\"" : ",\"") + name + "\":";
    int64_t next = 0;
    append_nested(text, values.contiguous(), 0, next);
  }
}

std::vector<std::string> ragged_json_members(const NamedTensors& outputs, const std::vector<std::string>& names,
                                             const BatchLayout& layout, int64_t rows) {
  std::vector<std::string> members(static_cast<std::size_t>(rows));
  const auto find = [&](const std::string& name) -> const at::Tensor& {
    for (const auto& [n, t] : outputs)
      if (n == name) return t;
    throw Error("predictions: no output '" + name + "'");
  };
  for (const std::string& name : names) {
    TP_CHECK(layout.ragged(name), "predictions: output '", name, "' is not ragged");
    const at::Tensor offsets = find(BatchLayout::offsets_name(name)).to(at::kCPU).contiguous();
    TP_CHECK(offsets.size(0) == rows + 1, "predictions: output '", BatchLayout::offsets_name(name), "' has ",
             offsets.size(0), " entries for ", rows, " samples");
    const at::Tensor output = find(name);
    const at::ScalarType type = output.is_floating_point() ? (output.scalar_type() == at::kDouble ? at::kDouble : at::kFloat)
                                                           : at::kLong;
    const int64_t width = output.numel() / std::max<int64_t>(output.size(0), 1);
    const at::Tensor values = output.detach().to(at::kCPU, type).reshape({output.size(0), width}).contiguous();
    const bool nested = output.dim() > 1;
    const int64_t* o = offsets.data_ptr<int64_t>();
    for (int64_t row = 0; row < rows; ++row) {
      std::string& text = members[static_cast<std::size_t>(row)];
      text += (text.empty() ? "\"" : ",\"") + name + "\":[";
      for (int64_t r = o[row]; r < o[row + 1]; ++r) {
        if (r > o[row]) text += ',';
        if (nested) text += '[';
        for (int64_t k = 0; k < width; ++k) {
          if (k) text += ',';
          append_value(text, values, r * width + k);
        }
        if (nested) text += ']';
      }
      text += ']';
    }
  }
  return members;
}

}  // namespace tp::detail
