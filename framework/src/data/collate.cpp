#include "tp/framework/data/collate.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/stack.h>

#include "tp/framework/error.h"

namespace tp {
namespace {

// "sample 3 (dataset index 812)" or "sample 3".
std::string describe(std::size_t position, std::span<const uint64_t> dataset_indices) {
  std::string out = "sample " + std::to_string(position);
  if (position < dataset_indices.size()) {
    out += " (dataset index " + std::to_string(dataset_indices[position]) + ")";
  }
  return out;
}

constexpr const char* kSameFieldsHint =
    "; every sample of a dataset must have the same field names (in the same order), dtypes and "
    "shapes (resize inside the dataset: for images of different sizes, image_folder's and "
    "webdataset's resize, center_crop or random_resized_crop; or declare the field pad or ragged "
    "through the dataset's field_batching, plugin ABI 1.6)";

const char* batching_name(Batching b) {
  return b == Batching::kPad ? "pad" : b == Batching::kRagged ? "ragged" : "stack";
}

// Whether `t` may join a batch whose first sample has `ref` under `batching`.
bool sizes_fit(const at::Tensor& t, const at::Tensor& ref, Batching batching) {
  switch (batching) {
    case Batching::kStack: return t.sizes() == ref.sizes();
    case Batching::kPad: return t.dim() == ref.dim();
    case Batching::kRagged: return t.dim() == ref.dim() && t.sizes().slice(1) == ref.sizes().slice(1);
  }
  return false;
}

const char* shape_rule(Batching batching) {
  switch (batching) {
    case Batching::kStack: return "";
    case Batching::kPad: return " (a pad field keeps its number of dims)";
    case Batching::kRagged: return " (a ragged field varies in dim 0 only)";
  }
  return "";
}

Batching batching_of(const CollateOptions& options, const std::string& name) {
  const FieldBatching* f = options.layout != nullptr ? options.layout->find(name) : nullptr;
  return f != nullptr ? f->batching : Batching::kStack;
}

// Checks sample 0 against the layout: every declared field present with dims its batching needs,
// no field named like one collate adds, every field a defined CPU tensor.
void check_first(const NamedTensors& first, const CollateOptions& options, std::span<const uint64_t> idx) {
  for (const auto& [name, t] : first) {
    TP_CHECK(t.defined(), "collate: field '", name, "' of ", describe(0, idx), " is an undefined tensor");
    TP_CHECK(t.device().is_cpu(), "collate: field '", name, "' of ", describe(0, idx), " is on ", t.device(),
             "; samples must be CPU tensors");
  }
  if (options.layout == nullptr) return;
  const auto has = [&](const std::string& n) {
    return std::any_of(first.begin(), first.end(), [&](const auto& field) { return field.first == n; });
  };
  for (const FieldBatching& f : options.layout->fields()) {
    if (f.batching == Batching::kStack) continue;
    TP_CHECK(has(f.name), "collate: the dataset declares field '", f.name, "' ", batching_name(f.batching),
             " (field_batching), but ", describe(0, idx), " has no such field");
    const std::string added =
        f.batching == Batching::kPad ? BatchLayout::lengths_name(f.name) : BatchLayout::offsets_name(f.name);
    TP_CHECK(!has(added), "collate: ", describe(0, idx), " has a field '", added, "', the name the loader gives to ",
             "the ", batching_name(f.batching), " field '", f.name, "''s ",
             f.batching == Batching::kPad ? "lengths" : "offsets", "; rename the dataset's field");
    const at::Tensor& t = std::find_if(first.begin(), first.end(), [&](const auto& x) { return x.first == f.name; })->second;
    TP_CHECK(t.dim() >= 1, "collate: field '", f.name, "' of ", describe(0, idx), " is declared ",
             batching_name(f.batching), " but is a scalar (", t.scalar_type(), "[]); only a field with dims can vary");
    if (f.batching == Batching::kPad && !t.is_floating_point())
      TP_CHECK(std::isfinite(f.pad_value) && std::trunc(f.pad_value) == f.pad_value,
               "collate: pad field '", f.name, "' is ", t.scalar_type(), " but its pad value ", f.pad_value,
               " is not an integer");
  }
}

// Checks sample `s` against sample 0, which defines the batch's fields.
void check_like_first(const std::vector<NamedTensors>& samples, std::size_t s, const CollateOptions& options,
                      std::span<const uint64_t> idx) {
  const NamedTensors& first = samples.front();
  const NamedTensors& cur = samples[s];
  TP_CHECK(cur.size() == first.size(), "collate: ", describe(s, idx), " has ", cur.size(),
           " fields but ", describe(0, idx), " has ", first.size(), kSameFieldsHint);
  for (std::size_t f = 0; f < first.size(); ++f) {
    const auto& [name, ref] = first[f];
    const auto& [cur_name, t] = cur[f];
    TP_CHECK(cur_name == name, "collate: field ", f, " of ", describe(s, idx), " is '", cur_name,
             "' but in ", describe(0, idx), " it is '", name, "'", kSameFieldsHint);
    TP_CHECK(t.defined(), "collate: field '", name, "' of ", describe(s, idx),
             " is an undefined tensor");
    TP_CHECK(t.device().is_cpu(), "collate: field '", name, "' of ", describe(s, idx),
             " is on ", t.device(), "; samples must be CPU tensors");
    TP_CHECK(t.scalar_type() == ref.scalar_type(), "collate: field '", name, "' of ",
             describe(s, idx), " has dtype ", t.scalar_type(), " but ", describe(0, idx), " has ",
             ref.scalar_type(), kSameFieldsHint);
    const Batching batching = batching_of(options, name);
    TP_CHECK(sizes_fit(t, ref, batching), "collate: ", batching_name(batching), " field '", name, "' of ",
             describe(s, idx), " has shape ", t.sizes(), " but ", describe(0, idx), " has ", ref.sizes(),
             shape_rule(batching), kSameFieldsHint);
  }
}

at::TensorOptions batch_options(at::ScalarType dtype, bool pinned) {
  return at::TensorOptions().dtype(dtype).pinned_memory(pinned);
}

// [B, S...] from B samples of shape S.
at::Tensor stack_column(const std::vector<at::Tensor>& column, bool pinned) {
  if (!pinned) return at::stack(column, 0);  // copies B sample buffers into one new allocation
  // Allocate pinned and stack into it: one copy instead of stack + pin_memory()'s second one.
  std::vector<int64_t> shape{static_cast<int64_t>(column.size())};
  const auto sample_shape = column.front().sizes();
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  at::Tensor stacked = at::empty(shape, batch_options(column.front().scalar_type(), true));
  at::stack_out(stacked, column, 0);
  return stacked;
}

// [B, max...] filled with `pad_value`, each sample copied into its corner; and its lengths [B, D].
std::pair<at::Tensor, at::Tensor> pad_column(const std::vector<at::Tensor>& column, double pad_value, bool pinned) {
  const int64_t dims = column.front().dim();
  const auto count = static_cast<int64_t>(column.size());
  std::vector<int64_t> shape(static_cast<std::size_t>(dims) + 1, 0);
  shape[0] = count;
  at::Tensor lengths = at::empty({count, dims}, batch_options(at::kLong, pinned));
  auto sizes = lengths.accessor<int64_t, 2>();
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t d = 0; d < dims; ++d) {
      sizes[s][d] = column[static_cast<std::size_t>(s)].size(d);
      shape[static_cast<std::size_t>(d) + 1] = std::max(shape[static_cast<std::size_t>(d) + 1], sizes[s][d]);
    }
  }
  at::Tensor padded = at::full(shape, pad_value, batch_options(column.front().scalar_type(), pinned));
  for (int64_t s = 0; s < count; ++s) {
    const at::Tensor& sample = column[static_cast<std::size_t>(s)];
    at::Tensor corner = padded.select(0, s);
    for (int64_t d = 0; d < dims; ++d) corner = corner.narrow(d, 0, sample.size(d));
    corner.copy_(sample);
  }
  return {std::move(padded), std::move(lengths)};
}

// [sum N_i, ...] and its offsets [B + 1].
std::pair<at::Tensor, at::Tensor> ragged_column(const std::vector<at::Tensor>& column, bool pinned) {
  const auto count = static_cast<int64_t>(column.size());
  at::Tensor offsets = at::empty({count + 1}, batch_options(at::kLong, pinned));
  auto at_offset = offsets.accessor<int64_t, 1>();
  at_offset[0] = 0;
  for (int64_t s = 0; s < count; ++s) at_offset[s + 1] = at_offset[s] + column[static_cast<std::size_t>(s)].size(0);
  std::vector<int64_t> shape = column.front().sizes().vec();
  shape[0] = at_offset[count];
  at::Tensor values = at::empty(shape, batch_options(column.front().scalar_type(), pinned));
  at::cat_out(values, column, 0);
  return {std::move(values), std::move(offsets)};
}

}  // namespace

NamedTensors collate(std::vector<NamedTensors>&& samples, const CollateOptions& options) {
  // Take ownership first so the caller's vector is empty however we leave.
  std::vector<NamedTensors> local = std::move(samples);
  samples.clear();
  const std::span<const uint64_t> idx = options.dataset_indices;
  TP_CHECK(!local.empty(), "collate: no samples to collate");
  TP_CHECK(idx.empty() || idx.size() == local.size(), "collate: ", idx.size(),
           " dataset indices for ", local.size(), " samples");
  check_first(local.front(), options, idx);
  for (std::size_t s = 1; s < local.size(); ++s) check_like_first(local, s, options, idx);

  const std::size_t num_fields = local.front().size();
  NamedTensors batch;
  batch.reserve(num_fields);
  std::vector<at::Tensor> column(local.size());
  for (std::size_t f = 0; f < num_fields; ++f) {
    // Move the field out of every sample: once `column` is cleared, the last reference to each
    // sample buffer is gone and its DLPack deleter runs here, one field at a time, which bounds
    // peak memory to the batch plus one field of samples.
    for (std::size_t s = 0; s < local.size(); ++s) column[s] = std::move(local[s][f].second);
    std::string name = std::move(local.front()[f].first);
    const FieldBatching* declared = options.layout != nullptr ? options.layout->find(name) : nullptr;
    if (declared == nullptr) {
      batch.emplace_back(std::move(name), stack_column(column, options.pin_memory));
    } else if (declared->batching == Batching::kPad) {
      auto [padded, lengths] = pad_column(column, declared->pad_value, options.pin_memory);
      batch.emplace_back(name, std::move(padded));
      batch.emplace_back(BatchLayout::lengths_name(name), std::move(lengths));
    } else {
      auto [values, offsets] = ragged_column(column, options.pin_memory);
      batch.emplace_back(name, std::move(values));
      batch.emplace_back(BatchLayout::offsets_name(name), std::move(offsets));
    }
    for (auto& t : column) t.reset();
  }
  return batch;
}

NamedTensors batch_rows(const NamedTensors& batch, int64_t start, int64_t count, const BatchLayout& layout) {
  const auto field = [&](const std::string& name) -> const at::Tensor* {
    for (const auto& [n, t] : batch)
      if (n == name) return &t;
    return nullptr;
  };
  NamedTensors rows;
  rows.reserve(batch.size());
  for (const auto& [name, tensor] : batch) {
    if (layout.ragged(name)) {
      const at::Tensor* offsets = field(BatchLayout::offsets_name(name));
      TP_CHECK(offsets != nullptr && offsets->dim() == 1 && offsets->size(0) >= start + count + 1,
               "ragged batch field '", name, "' has no offsets field '", BatchLayout::offsets_name(name),
               "' of shape [B + 1] with B >= ", start + count);
      // Reads two offsets back (a device sync on CUDA): cutting a batch into rows is the
      // out-of-memory path's business, never the steady state's.
      const at::Tensor bounds = offsets->narrow(0, start, count + 1).to(at::kCPU);
      const int64_t first = bounds[0].item<int64_t>();
      rows.emplace_back(name, tensor.narrow(0, first, bounds[count].item<int64_t>() - first));
      continue;
    }
    if (tensor.dim() == 0 || tensor.size(0) < start + count)
      throw Error("batch field '" + name + "' has shape " + c10::str(tensor.sizes()) + ", not [B, ...] with B >= " +
                  std::to_string(start + count) + ": every field of a batch needs the samples along dim 0.");
    const bool offsets_of_ragged = name.size() > 8 && name.ends_with("_offsets") &&
                                   layout.ragged(std::string_view(name).substr(0, name.size() - 8));
    if (offsets_of_ragged) {
      // Sample i of the piece starts at its offset minus the piece's first: rebased to 0.
      const at::Tensor piece = tensor.narrow(0, start, count + 1);
      rows.emplace_back(name, piece - piece.narrow(0, 0, 1));
      continue;
    }
    rows.emplace_back(name, tensor.narrow(0, start, count));
  }
  return rows;
}

}  // namespace tp
