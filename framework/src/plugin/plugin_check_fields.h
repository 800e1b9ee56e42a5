// How `host plugins check` describes a dataset's fields: each one's name, element type and
// per-sample shape as the loader stacks them, compared across samples and printed in its summary
// and messages ("image float32[3, 32, 32]", a pad field's "[*, 4] (pad 0)").
#pragma once

#include "tp/dlpack.h"

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"

namespace tp::detail {

/// "float32", "uint8", "int64x4" (lanes): a DLPack element type as the summary prints it.
std::string dtype_text(const DLDataType& t);

/// What the loader stacks: a field's name, element type and per-sample shape.
struct FieldShape {
  std::string name;
  DLDataType dtype{};
  std::vector<int64_t> shape;

  /// The same name, element type (code, bits, lanes) and shape: what lets two samples stack.
  bool operator==(const FieldShape& o) const {
    return name == o.name && dtype.code == o.dtype.code && dtype.bits == o.dtype.bits && dtype.lanes == o.dtype.lanes &&
           shape == o.shape;
  }
  /// "image float32[3, 32, 32]".
  std::string text() const;
};

/// The field as it may vary under `layout` (plugin ABI 1.6): the sizes a pad field may change
/// (all) or a ragged one (dim 0) become -1, which prints and compares as "any".
FieldShape as_declared(FieldShape field, const BatchLayout& layout);
/// as_declared of each field.
std::vector<FieldShape> as_declared(std::vector<FieldShape> fields, const BatchLayout& layout);

/// The fields, comma-separated, a pad or ragged field's varying sizes as "*" with its batching;
/// "no fields" for none.
std::string fields_text(const std::vector<FieldShape>& fields, const BatchLayout& layout = {});

}  // namespace tp::detail
