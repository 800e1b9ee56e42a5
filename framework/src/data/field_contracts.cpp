#include "tp/framework/data/field_contracts.h"

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <utility>

#include "tp/framework/error.h"

namespace tp {
namespace {

/// The values of a ragged field's "<field>_offsets" ([B + 1], int64), or empty when `fields` has
/// none: rows are then one sample's.
std::vector<int64_t> offsets_of(const NamedTensors& fields, const std::string& field) {
  const std::string name = field + "_offsets";
  for (const auto& [key, tensor] : fields) {
    if (key != name || tensor.dim() != 1 || tensor.scalar_type() != at::kLong) continue;
    const at::Tensor host = tensor.cpu().contiguous();
    return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
  }
  return {};
}

/// "<where>, sample <k> of the batch, <what> <row>" for a batch with offsets; "<where>, <what> <row>".
std::string place(const std::string& where, const std::vector<int64_t>& offsets, int64_t row, const char* what) {
  if (offsets.size() < 2) return where + ", " + what + " " + std::to_string(row);
  const auto after = std::upper_bound(offsets.begin(), offsets.end(), row);
  const int64_t sample = std::max<int64_t>(0, (after - offsets.begin()) - 1);
  return where + ", sample " + std::to_string(sample) + " of the batch, " + what + " " +
         std::to_string(row - offsets[static_cast<size_t>(sample)]);
}

/// {samples with a bad entry, samples}: a ragged batch's samples by its offsets, a stacked batch's
/// by its first dimension (`batch_size`), a single sample (`batch_size` 0) as one.
std::pair<int64_t, int64_t> samples_hit(const at::Tensor& bad, const std::vector<int64_t>& offsets, int64_t batch_size) {
  if (offsets.size() >= 2) {
    int64_t hit = 0;
    for (size_t k = 0; k + 1 < offsets.size(); ++k)
      if (offsets[k + 1] > offsets[k] && bad.slice(0, offsets[k], offsets[k + 1]).any().item<bool>()) ++hit;
    return {hit, static_cast<int64_t>(offsets.size()) - 1};
  }
  if (batch_size > 0 && bad.numel() % batch_size == 0)
    return {bad.reshape({batch_size, -1}).any(1).sum().item<int64_t>(), batch_size};
  return {bad.any().item<bool>() ? 1 : 0, 1};
}

}  // namespace

FieldContractCheck::FieldContractCheck(std::string loss_id, std::vector<FieldContract> contracts)
    : loss_id_(std::move(loss_id)), contracts_(std::move(contracts)), tallies_(contracts_.size()) {}

void FieldContractCheck::add(const NamedTensors& fields, const std::string& where, bool batch) {
  for (size_t c = 0; c < contracts_.size(); ++c) {
    const FieldContract& contract = contracts_[c];
    const auto found = std::find_if(fields.begin(), fields.end(),
                                    [&](const auto& entry) { return entry.first == contract.field; });
    if (found == fields.end()) {
      tallies_[c].misfits.push_back(where + " has no field '" + contract.field + "'");
      continue;
    }
    const std::vector<int64_t> offsets = offsets_of(fields, contract.field);
    const int64_t batch_size = batch && found->second.dim() > 0 ? found->second.size(0) : 0;
    if (contract.kind == FieldContract::Kind::kBoxesXyxy)
      add_boxes(found->second, offsets, batch_size, where, tallies_[c]);
    else
      add_class_ids(contract, found->second, offsets, batch_size, where, tallies_[c]);
  }
}

int64_t FieldContractCheck::count_bad(const at::Tensor& bad, const std::vector<int64_t>& offsets, int64_t batch_size,
                                      Tally& tally) {
  const auto [hit, units] = samples_hit(bad, offsets, batch_size);
  tally.units += units;
  const int64_t bad_count = bad.sum().item<int64_t>();
  if (bad_count == 0) return -1;
  tally.bad += bad_count;
  tally.bad_units += hit;
  if (!tally.first.empty()) return -1;
  return bad.nonzero().select(1, 0)[0].item<int64_t>();
}

void FieldContractCheck::add_boxes(const at::Tensor& field, const std::vector<int64_t>& offsets, int64_t batch_size,
                                   const std::string& where, Tally& tally) {
  if (!field.is_floating_point() || field.dim() == 0 || field.size(-1) != 4) {
    tally.misfits.push_back(where + " gives " + std::string(c10::toString(field.scalar_type())) + " " +
                            c10::str(field.sizes()) + ", not floating rows of 4");
    return;
  }
  const at::Tensor rows = field.detach().cpu().to(at::kDouble).reshape({-1, 4});
  // A row of four zeros is padding (a padded field's filler), not a box.
  const at::Tensor padding = (rows == 0).all(1);
  const at::Tensor finite = at::isfinite(rows).all(1);
  const at::Tensor ordered = (rows.select(1, 2) > rows.select(1, 0)) & (rows.select(1, 3) > rows.select(1, 1));
  const at::Tensor bad = ~padding & ~(finite & ordered);
  tally.total += rows.size(0) - padding.sum().item<int64_t>();
  const int64_t row = count_bad(bad, offsets, batch_size, tally);
  if (row < 0) return;
  const at::Tensor box = rows[row];
  tally.first = place(where, offsets, row, "box") + " = [" + c10::Join(", ", std::vector<double>(
                    box.data_ptr<double>(), box.data_ptr<double>() + 4)) + "]";
}

void FieldContractCheck::add_class_ids(const FieldContract& contract, const at::Tensor& field,
                                       const std::vector<int64_t>& offsets, int64_t batch_size, const std::string& where,
                                       Tally& tally) {
  if (field.is_floating_point() || field.is_complex() || field.scalar_type() == at::kBool) {
    tally.misfits.push_back(where + " gives " + std::string(c10::toString(field.scalar_type())) +
                            " values, not integer class ids");
    return;
  }
  const at::Tensor values = field.detach().cpu().to(at::kLong).reshape({-1});
  at::Tensor bad = values < 0;
  if (contract.class_count > 0) bad = bad | (values >= contract.class_count);
  tally.total += values.numel();
  const int64_t index = count_bad(bad, offsets, batch_size, tally);
  if (index < 0) return;
  tally.first = place(where, offsets, index, "value") + " = " + std::to_string(values[index].item<int64_t>());
}

std::vector<std::string> FieldContractCheck::problems() const {
  std::vector<std::string> out;
  for (size_t c = 0; c < contracts_.size(); ++c) {
    const FieldContract& contract = contracts_[c];
    const Tally& tally = tallies_[c];
    const std::string head = "target field '" + contract.field + "': " + loss_id_ + " takes ";
    if (!tally.misfits.empty())
      out.push_back(head + (contract.kind == FieldContract::Kind::kBoxesXyxy ? "boxes as floating [N, 4] rows"
                                                                             : "integer class ids") +
                    ", but " + tally.misfits.front() +
                    (tally.misfits.size() > 1 ? " (and " + std::to_string(tally.misfits.size() - 1) + " more)" : "") +
                    ". Give the field the loss reads (its config key names it) in that form.");
    if (tally.bad == 0) continue;
    const std::string counts = std::to_string(tally.bad) + " of " + std::to_string(tally.total);
    const std::string spread = std::to_string(tally.bad_units) + " of " + std::to_string(tally.units) + " samples";
    if (contract.kind == FieldContract::Kind::kBoxesXyxy) {
      out.push_back(head + "boxes as (x1, y1, x2, y2) with x2 > x1 and y2 > y1, every corner finite, but " + counts +
                    " boxes, in " + spread + ", are not (first: " + tally.first +
                    "). Did you give x, y, w, h? Convert with x2 = x + w, y2 = y + h; a box of zero width or "
                    "height cannot be learnt either: leave it out of the targets.");
    } else {
      const std::string range = contract.class_count > 0 ? "[0, " + std::to_string(contract.class_count) + ")"
                                                         : "0 or more";
      out.push_back(head + "class ids " + range + ", but " + counts + " values, in " + spread +
                    ", are not (first: " + tally.first + "). Number the classes 0..K-1 as the model's " +
                    "outputs are; an ignore or background id has no place in the targets.");
    }
  }
  return out;
}

void check_first_batch(const std::string& loss_id, const LossDescription& description, const NamedTensors& batch) {
  if (description.contracts.empty()) return;
  FieldContractCheck check(loss_id, description.contracts);
  check.add(batch, "the first training batch", true);
  const std::vector<std::string> problems = check.problems();
  if (problems.empty()) return;
  std::string message;
  for (const std::string& problem : problems) message += (message.empty() ? "" : " ") + problem;
  throw ConfigError("data.train", message + " Nothing was trained. `host plugins check --config RUN.toml DATASET.so` "
                                            "and `host verify --checks data` hold every sample they read to the same "
                                            "contracts.");
}

}  // namespace tp
