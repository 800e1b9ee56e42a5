// Fuzz target: the check of a model's ragged outputs at the plugin boundary
// (check_ragged_outputs, framework/src/plugin/ragged_outputs.cpp; docs/hardening.md section 14,
// items 1 and 2) and the framework's reader of what it lets through (ragged_json_members, which
// `host predict --format jsonl` runs on every batch). The input describes up to three outputs: each
// a rows tensor (1-D or 2-D, float or int64, possibly missing or 0-dimensional) and its
// "<name>_offsets" (int64, int32 or float, 1-D or 2-D, any length and values, or the previous
// output's offsets tensor itself). Every input is refused with a tp::PluginError or accepted; an
// accepted set is written as JSON for each ragged output with its own sample count, and for all of
// them at the first one's count (a tp::Error when the counts differ). Any other exception traps,
// as does a crash or a sanitizer report: an accepted offsets list is one no reader can overrun.
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/prediction/ragged_rows.h"
#include "plugin/ragged_outputs.h"
#include "tp/framework/data/batch_layout.h"
#include "tp/framework/error.h"

namespace {

/// The input as a stream of draws; zeros once it is used up.
class Draws {
 public:
  Draws(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  /// Mostly small values around 0 (offsets that nearly fit), sometimes any 64-bit value.
  int64_t offset() {
    const uint8_t head = byte();
    if ((head & 0x80) == 0) return static_cast<int64_t>(head) - 8;
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = (v << 8) | byte();
    return static_cast<int64_t>(v);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

tp::NamedTensors outputs_from(Draws& draws) {
  tp::NamedTensors outputs;
  at::Tensor previous_offsets;
  const int count = 1 + draws.byte() % 3;
  for (int k = 0; k < count; ++k) {
    const std::string name = "out" + std::to_string(k);
    const uint8_t mode = draws.byte() % 8;
    const int64_t rows = draws.byte() % 40;
    const int64_t width = draws.byte() % 4;
    const bool floating = (draws.byte() & 1) != 0;
    const at::ScalarType type = floating ? at::kFloat : at::kLong;
    if (mode == 5) {
      outputs.emplace_back(name, at::zeros({}, type));  // 0-dimensional: no rows
    } else if (mode != 4) {                              // 4: an offsets output with no rows output
      const at::Tensor values = width == 0 ? at::arange(rows, type) : at::arange(rows * width, type).reshape({rows, width});
      outputs.emplace_back(name, values);
    }
    if (mode == 0 && previous_offsets.defined()) {  // the same offsets tensor as the output before
      outputs.emplace_back(name + "_offsets", previous_offsets);
      continue;
    }
    const int64_t length = draws.byte() % 12;
    std::vector<int64_t> values;
    for (int64_t i = 0; i < length; ++i) values.push_back(draws.offset());
    at::Tensor offsets = at::tensor(values, at::kLong);
    if (mode == 1) offsets = offsets.to(at::kInt);
    if (mode == 2) offsets = offsets.to(at::kFloat);
    if (mode == 3) offsets = offsets.reshape({length, 1});
    previous_offsets = offsets;
    outputs.emplace_back(name + "_offsets", offsets);
  }
  return outputs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Draws draws(data, size);
  const tp::NamedTensors outputs = outputs_from(draws);
  try {
    // The batch size unknown (-1): the length check is one comparison, the rest is what a fuzzer reaches.
    tp::detail::check_ragged_outputs(outputs, -1, "org.fuzz.model", "the model");
  } catch (const tp::PluginError&) {
    return 0;  // refused at the boundary: nothing reads it
  } catch (...) {
    __builtin_trap();  // the check itself failed some other way
  }
  const tp::BatchLayout layout = tp::output_layout(outputs);
  std::vector<std::string> ragged;
  for (const tp::FieldBatching& field : layout.fields()) ragged.push_back(field.name);
  try {
    for (const std::string& name : ragged) {
      int64_t samples = 0;
      for (const auto& [n, t] : outputs)
        if (n == tp::BatchLayout::offsets_name(name)) samples = t.size(0) - 1;
      const std::vector<std::string> members = tp::detail::ragged_json_members(outputs, {name}, layout, samples);
      if (static_cast<int64_t>(members.size()) != samples) __builtin_trap();
    }
  } catch (...) {
    __builtin_trap();  // accepted, yet its own reader failed on it
  }
  if (ragged.size() > 1) {
    try {
      int64_t samples = 0;
      for (const auto& [n, t] : outputs)
        if (n == tp::BatchLayout::offsets_name(ragged.front())) samples = t.size(0) - 1;
      tp::detail::ragged_json_members(outputs, ragged, layout, samples);
    } catch (const tp::Error&) {
      // outputs of different sample counts: refused by the reader's own check
    } catch (...) {
      __builtin_trap();
    }
  }
  return 0;
}
