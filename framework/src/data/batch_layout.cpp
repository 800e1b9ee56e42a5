#include "tp/framework/data/batch_layout.h"

#include <algorithm>
#include <set>
#include <utility>

#include "tp/framework/error.h"

namespace tp {

BatchLayout::BatchLayout(std::vector<FieldBatching> fields) : fields_(std::move(fields)) {
  std::set<std::string, std::less<>> names;
  for (const FieldBatching& f : fields_) {
    TP_CHECK(!f.name.empty(), "batch layout: a field without a name");
    TP_CHECK(names.insert(f.name).second, "batch layout: field '", f.name, "' is declared twice");
  }
  // An added field must not shadow a declared one: "x" ragged and "x_offsets" padded would make
  // two batch fields of one name.
  for (const FieldBatching& f : fields_) {
    if (f.batching == Batching::kStack) continue;
    const std::string added = f.batching == Batching::kPad ? lengths_name(f.name) : offsets_name(f.name);
    TP_CHECK(names.count(added) == 0, "batch layout: field '", added, "' is declared, but the loader adds a field of ",
             "that name for '", f.name, "'; rename one of them");
  }
}

const FieldBatching* BatchLayout::find(std::string_view name) const {
  const auto it = std::find_if(fields_.begin(), fields_.end(), [&](const FieldBatching& f) { return f.name == name; });
  return it == fields_.end() || it->batching == Batching::kStack ? nullptr : &*it;
}

bool BatchLayout::ragged(std::string_view name) const {
  const FieldBatching* f = find(name);
  return f != nullptr && f->batching == Batching::kRagged;
}

std::string BatchLayout::describe() const {
  std::string out;
  for (const FieldBatching& f : fields_) {
    if (f.batching == Batching::kStack) continue;
    if (!out.empty()) out += ", ";
    out += f.name + (f.batching == Batching::kRagged ? ": ragged" : ": pad " + c10::str(f.pad_value));
  }
  return out;
}

std::string BatchLayout::lengths_name(std::string_view name) { return std::string(name) + "_lengths"; }
std::string BatchLayout::offsets_name(std::string_view name) { return std::string(name) + "_offsets"; }

BatchLayout output_layout(const NamedTensors& outputs) {
  std::vector<FieldBatching> ragged;
  for (const auto& [name, tensor] : outputs) {
    const auto offsets = std::find_if(outputs.begin(), outputs.end(), [&, n = BatchLayout::offsets_name(name)](const auto& o) {
      return o.first == n && o.second.dim() == 1 && o.second.scalar_type() == at::kLong;
    });
    if (offsets != outputs.end() && tensor.dim() >= 1) ragged.push_back({name, Batching::kRagged, 0.0});
  }
  return BatchLayout(std::move(ragged));
}

int64_t batch_size(const NamedTensors& batch, const BatchLayout& layout) {
  std::set<std::string, std::less<>> offsets;
  for (const FieldBatching& f : layout.fields())
    if (f.batching == Batching::kRagged) offsets.insert(BatchLayout::offsets_name(f.name));
  for (const auto& [name, tensor] : batch) {
    if (layout.ragged(name) || offsets.count(name) != 0 || tensor.dim() == 0) continue;
    return tensor.size(0);
  }
  for (const auto& [name, tensor] : batch)
    if (offsets.count(name) != 0 && tensor.dim() == 1) return tensor.size(0) - 1;
  return 0;
}

}  // namespace tp
