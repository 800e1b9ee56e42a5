#include "tp/framework/engine/prediction_rows.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

#include "tp/framework/error.h"

namespace tp {
namespace {

const char* type_code(PredictionColumn::Type type) {
  switch (type) {
    case PredictionColumn::Type::kInt64: return "i8";
    case PredictionColumn::Type::kFloat32: return "f4";
    case PredictionColumn::Type::kFloat64: return "f8";
  }
  return "?";
}

at::ScalarType scalar_type(PredictionColumn::Type type) {
  switch (type) {
    case PredictionColumn::Type::kInt64: return at::kLong;
    case PredictionColumn::Type::kFloat32: return at::kFloat;
    case PredictionColumn::Type::kFloat64: return at::kDouble;
  }
  return at::kFloat;
}

PredictionColumn::Type column_type(const at::Tensor& t) {
  if (!t.is_floating_point()) return PredictionColumn::Type::kInt64;
  return t.scalar_type() == at::kDouble ? PredictionColumn::Type::kFloat64 : PredictionColumn::Type::kFloat32;
}

}  // namespace

int64_t PredictionColumn::values() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t PredictionColumn::bytes() const { return values() * (type == Type::kFloat32 ? 4 : 8); }

int64_t record_bytes(const PredictionSchema& schema) {
  int64_t total = 0;
  for (const PredictionColumn& c : schema) total += c.bytes();
  return total;
}

std::string schema_text(const PredictionSchema& schema) {
  std::string text;
  for (const PredictionColumn& c : schema) {
    if (!text.empty()) text += ';';
    text += c.name + ':' + type_code(c.type) + ':';
    for (std::size_t i = 0; i < c.shape.size(); ++i) text += (i ? "," : "") + std::to_string(c.shape[i]);
  }
  return text;
}

std::string columns_text(const PredictionSchema& schema) {
  std::string text;
  for (const PredictionColumn& c : schema) {
    const char* type = c.type == PredictionColumn::Type::kInt64     ? "int64"
                       : c.type == PredictionColumn::Type::kFloat32 ? "float32"
                                                                    : "float64";
    text += (text.empty() ? "" : ", ") + c.name + " " + type;
    if (c.shape.empty()) continue;
    text += " [";
    for (std::size_t i = 0; i < c.shape.size(); ++i) text += (i ? ", " : "") + std::to_string(c.shape[i]);
    text += "]";
  }
  return text;
}

PredictionSchema parse_schema(const std::string& text) {
  PredictionSchema schema;
  std::istringstream columns(text);
  for (std::string item; std::getline(columns, item, ';');) {
    // The name may hold ':' only before the last two separators.
    const auto second = item.rfind(':');
    const auto first = second == std::string::npos || second == 0 ? std::string::npos : item.rfind(':', second - 1);
    if (first == std::string::npos) throw Error("prediction schema: malformed column '" + item + "'");
    PredictionColumn c;
    c.name = item.substr(0, first);
    const std::string code = item.substr(first + 1, second - first - 1);
    c.type = code == "i8" ? PredictionColumn::Type::kInt64
             : code == "f8" ? PredictionColumn::Type::kFloat64
             : code == "f4" ? PredictionColumn::Type::kFloat32
                            : throw Error("prediction schema: unknown type '" + code + "'");
    std::istringstream dims(item.substr(second + 1));
    for (std::string d; std::getline(dims, d, ',');) c.shape.push_back(std::stoll(d));
    schema.push_back(std::move(c));
  }
  return schema;
}

RecordBlock pack_records(const std::vector<std::pair<std::string, at::Tensor>>& columns) {
  if (columns.empty() || columns.front().first != "index")
    throw Error("prediction records: the first column must be \"index\"");
  RecordBlock block;
  block.rows = columns.front().second.size(0);
  std::vector<at::Tensor> host; // each [rows, values] contiguous on the CPU in its column type
  for (const auto& [name, tensor] : columns) {
    if (tensor.dim() == 0 || tensor.size(0) != block.rows)
      throw Error("prediction records: column '" + name + "' has " +
                  (tensor.dim() == 0 ? std::string("no batch dimension") : std::to_string(tensor.size(0)) + " rows") +
                  " for " + std::to_string(block.rows) + " samples");
    PredictionColumn c{name, column_type(tensor), tensor.sizes().slice(1).vec()};
    host.push_back(tensor.detach().to(at::kCPU, scalar_type(c.type)).reshape({block.rows, c.values()}).contiguous());
    block.schema.push_back(std::move(c));
  }
  const int64_t record = record_bytes(block.schema);
  block.bytes.resize(static_cast<std::size_t>(record * block.rows));
  int64_t offset = 0; // of the column inside a record
  for (std::size_t i = 0; i < host.size(); ++i) {
    const int64_t width = block.schema[i].bytes();
    const auto* source = static_cast<const uint8_t*>(host[i].data_ptr());
    for (int64_t row = 0; row < block.rows; ++row)
      std::memcpy(block.bytes.data() + row * record + offset, source + row * width, static_cast<std::size_t>(width));
    offset += width;
  }
  return block;
}

void sort_by_index(RecordBlock& block) {
  const int64_t record = record_bytes(block.schema);
  std::vector<std::pair<int64_t, int64_t>> keys(static_cast<std::size_t>(block.rows)); // (index, row)
  for (int64_t row = 0; row < block.rows; ++row) {
    int64_t index = 0;
    std::memcpy(&index, block.bytes.data() + row * record, sizeof index);
    keys[static_cast<std::size_t>(row)] = {index, row};
  }
  std::stable_sort(keys.begin(), keys.end());
  std::vector<uint8_t> sorted(block.bytes.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    std::memcpy(sorted.data() + static_cast<int64_t>(i) * record, block.bytes.data() + keys[i].second * record,
                static_cast<std::size_t>(record));
  block.bytes = std::move(sorted);
  if (block.attachments.empty()) return;
  TP_CHECK(static_cast<int64_t>(block.attachments.size()) == block.rows, "prediction records: ",
           block.attachments.size(), " attachments for ", block.rows, " rows");
  std::vector<std::string> attachments(block.attachments.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    attachments[i] = std::move(block.attachments[static_cast<std::size_t>(keys[i].second)]);
  block.attachments = std::move(attachments);
}

}  // namespace tp
