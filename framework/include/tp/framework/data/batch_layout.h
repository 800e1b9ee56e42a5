// How a dataset's fields form batches (plugin ABI 1.6, tp_field_batching_t): which fields stack,
// which are padded and which are ragged, and the fields the loader adds for them. The layout is a
// property of a dataset split, constant for its life; collate() applies it, and everything that
// cuts a batch into rows (micro-batches, predictions) reads it back through this class.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/data/named_tensors.h"

namespace tp {

/// How one field of B samples becomes one batch field.
enum class Batching {
  kStack,  ///< same shape S in every sample: [B, S...]
  kPad,    ///< same ndim D >= 1: padded at the end of every dim to the batch's largest size, plus
           ///< "<name>_lengths" int64 [B, D] (each sample's own sizes)
  kRagged, ///< same sizes past dim 0, which varies (may be 0): concatenated, [sum N_i, ...], plus
           ///< "<name>_offsets" int64 [B + 1]
};

/// One field that does not stack.
struct FieldBatching {
  std::string name;
  Batching batching = Batching::kStack;
  double pad_value = 0.0;  ///< kPad: the padded elements' value, converted to the field's dtype
};

/// The non-stacking fields of a dataset split; every field not listed stacks. An empty layout is
/// what every dataset built for plugin ABI < 1.6 has.
class BatchLayout {
 public:
  BatchLayout() = default;
  /// Throws tp::Error for an empty or repeated name, or a name that another entry's added field
  /// would take ("x" ragged and "x_offsets" declared too).
  explicit BatchLayout(std::vector<FieldBatching> fields);

  /// The entry of `name`, or nullptr when the field stacks.
  const FieldBatching* find(std::string_view name) const;
  /// Whether `name` is a ragged field of this layout.
  bool ragged(std::string_view name) const;
  const std::vector<FieldBatching>& fields() const noexcept { return fields_; }
  bool empty() const noexcept { return fields_.empty(); }
  /// "image: pad 0, boxes: ragged" (empty when every field stacks): for logs and messages.
  std::string describe() const;

  /// The field collate() adds for pad field `name`: "<name>_lengths".
  static std::string lengths_name(std::string_view name);
  /// The field collate() adds for ragged field `name`: "<name>_offsets".
  static std::string offsets_name(std::string_view name);

 private:
  std::vector<FieldBatching> fields_;
};

/// The layout of a model's outputs, which declare no layout: every output X next to an int64
/// [B + 1] output "X_offsets" is ragged (the ABI 1.6 convention, as a model's detections: rows
/// detection_boxes [sum D_i, 4] with detection_boxes_offsets). Everything else stacks.
BatchLayout output_layout(const NamedTensors& outputs);

/// The number of samples (rows) of a collated `batch`: dim 0 of its first field that is neither
/// a ragged field nor the offsets collate() added for one, else offsets.size(0) - 1; 0 for an
/// empty batch. Never reads tensor values (no device sync).
int64_t batch_size(const NamedTensors& batch, const BatchLayout& layout = {});

}  // namespace tp
