// The rows `host predict` writes, as packed little-endian records: one record per sample, the
// columns side by side in a fixed order (NumPy's packed structured dtype). Ranks exchange blocks
// of records and rank 0 orders them by the index column, which is always first; the writers read
// the same records (prediction_writer.h), so nothing is converted twice.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tp {

/// One column: a name, an element type and a per-sample shape ({} = one value per sample).
struct PredictionColumn {
  enum class Type { kInt64, kFloat32, kFloat64 };
  std::string name;
  Type type = Type::kFloat32;
  std::vector<int64_t> shape;
  bool operator==(const PredictionColumn&) const = default;

  /// Values per sample (the product of shape).
  int64_t values() const;
  /// Bytes per sample: values() x 8 or 4.
  int64_t bytes() const;
};

/// Columns of one prediction file. The first is always "index" (int64).
using PredictionSchema = std::vector<PredictionColumn>;

/// Bytes per record of `schema`.
int64_t record_bytes(const PredictionSchema& schema);

/// A compact text form of `schema` ("index:i8:;logits:f4:10;..."), exchanged between ranks.
std::string schema_text(const PredictionSchema& schema);
/// The inverse of schema_text. Throws tp::Error on text it did not write.
PredictionSchema parse_schema(const std::string& text);
/// `schema` for messages: "index int64, logits float32 [10], label int64".
std::string columns_text(const PredictionSchema& schema);

/// Records of `n` samples.
struct RecordBlock {
  PredictionSchema schema;
  int64_t rows = 0;
  std::vector<uint8_t> bytes; ///< rows x record_bytes(schema)
  /// Empty, or one variable-size payload per row, in row order: the encoded class map of the
  /// sample under `host predict --format png`.
  std::vector<std::string> attachments;
};

/// Packs named per-sample tensors (each [n, ...] on any device; integer and bool tensors become
/// int64, floating ones float32, double stays float64) into records in the given column order.
/// The first column must be "index". Throws tp::Error when the leading sizes differ.
RecordBlock pack_records(const std::vector<std::pair<std::string, at::Tensor>>& columns);

/// The records of `block` (and their attachments) sorted by their index column (stable), for
/// writing in dataset order.
void sort_by_index(RecordBlock& block);

}  // namespace tp
