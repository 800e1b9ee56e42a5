#include "tp/framework/data/collate.h"

#include <string>
#include <utility>

#include <ATen/ops/empty.h>
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
    "shapes (resize or pad variable-size data inside the dataset)";

// Checks sample `s` against sample 0, which defines the batch's fields.
void check_like_first(const std::vector<NamedTensors>& samples, std::size_t s,
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
    TP_CHECK(t.sizes() == ref.sizes(), "collate: field '", name, "' of ", describe(s, idx),
             " has shape ", t.sizes(), " but ", describe(0, idx), " has ", ref.sizes(),
             kSameFieldsHint);
  }
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
  {
    const NamedTensors& first = local.front();
    for (std::size_t f = 0; f < first.size(); ++f) {
      TP_CHECK(first[f].second.defined(), "collate: field '", first[f].first, "' of ",
               describe(0, idx), " is an undefined tensor");
      TP_CHECK(first[f].second.device().is_cpu(), "collate: field '", first[f].first, "' of ",
               describe(0, idx), " is on ", first[f].second.device(),
               "; samples must be CPU tensors");
    }
  }
  for (std::size_t s = 1; s < local.size(); ++s) check_like_first(local, s, idx);

  const std::size_t num_fields = local.front().size();
  NamedTensors batch;
  batch.reserve(num_fields);
  std::vector<at::Tensor> column(local.size());
  for (std::size_t f = 0; f < num_fields; ++f) {
    // Move the field out of every sample: once `column` is cleared, the last reference to each
    // sample buffer is gone and its DLPack deleter runs here, one field at a time, which bounds
    // peak memory to the batch plus one field of samples.
    for (std::size_t s = 0; s < local.size(); ++s) column[s] = std::move(local[s][f].second);
    at::Tensor stacked;
    if (options.pin_memory) {
      // Allocate pinned and stack into it: one copy instead of stack + pin_memory()'s second one.
      std::vector<int64_t> shape{static_cast<int64_t>(local.size())};
      const auto sample_shape = column.front().sizes();
      shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
      stacked = at::empty(shape, at::TensorOptions()
                                     .dtype(column.front().scalar_type())
                                     .pinned_memory(true));
      at::stack_out(stacked, column, 0);
    } else {
      stacked = at::stack(column, 0);  // copies B sample buffers into one new allocation
    }
    for (auto& t : column) t.reset();
    batch.emplace_back(std::move(local.front()[f].first), std::move(stacked));
  }
  return batch;
}

NamedTensors batch_rows(const NamedTensors& batch, int64_t start, int64_t count) {
  NamedTensors rows;
  rows.reserve(batch.size());
  for (const auto& [name, tensor] : batch) {
    if (tensor.dim() == 0 || tensor.size(0) < start + count)
      throw Error("batch field '" + name + "' has shape " + c10::str(tensor.sizes()) + ", not [B, ...] with B >= " +
                  std::to_string(start + count) + ": every field of a batch needs the samples along dim 0.");
    rows.emplace_back(name, tensor.narrow(0, start, count));
  }
  return rows;
}

}  // namespace tp
