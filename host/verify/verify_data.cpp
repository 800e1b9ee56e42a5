// The data check: what PLG-8 and the dataset contract promise, measured on the run's datasets.
// A sample read twice with the same context is the same bits (no rand(), time or global state),
// and the same again when another loader thread reads it (nothing depends on ctx->worker); the
// first training batches are the same bits for 0, 1 and 3 loader threads (which thread loads a
// batch depends on timing, so this end-to-end comparison may miss what the read by "thread 2 of
// 3" finds); every sample has the first sample's field names, dtypes and shapes; floating fields
// hold no NaN or Inf; the samples keep the loss's target field contracts (plugin ABI 1.9: boxes as
// x1 y1 x2 y2, class ids in range), so boxes given as x, y, w, h are found here. Cost: 3 x 8 samples per split plus 3 x 2 training batches (the loaders read
// up to data.prefetch batches ahead, dropped unread).
#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

#include "tp/framework/data/data_loader.h"
#include "tp/framework/data/field_contracts.h"
#include "tp/framework/data/sampler.h"
#include "tp/framework/plugin/loss_proxy.h"
#include "verify/verify.h"

namespace tp::cli::verify {
namespace {

constexpr uint64_t kSamplesPerSplit = 8;  // samples of each split read twice
constexpr int64_t kBatchesCompared = 2;   // training batches compared across worker counts
constexpr int64_t kWorkerCounts[] = {0, 1, 3};
constexpr size_t kNotesShown = 6;

/// "image Float [3, 32, 32], label Long []"; the sizes a variable-size field may vary in (plugin
/// ABI 1.6) as '*': "image Float [*, *, *]" (pad), "boxes Float [*, 4]" (ragged).
std::string describe(const NamedTensors& fields, const BatchLayout& layout) {
  std::string text;
  for (const auto& [name, tensor] : fields) {
    std::string shape = c10::str(tensor.sizes());
    if (const FieldBatching* f = layout.find(name)) {
      shape = "[";
      for (int64_t d = 0; d < tensor.dim(); ++d) {
        const bool varies = f->batching == Batching::kPad || d == 0;
        shape += (d ? ", " : "") + (varies ? std::string("*") : std::to_string(tensor.size(d)));
      }
      shape += "]";
    }
    text += (text.empty() ? "" : ", ") + name + " " + std::string(c10::toString(tensor.scalar_type())) + " " + shape;
  }
  return text;
}

/// Reads the first samples of `split` twice, compares the reads and each sample's fields with the
/// first sample's, looks for NaN/Inf and gives each sample to `contracts`. Appends one line per
/// problem.
void check_samples(DatasetProxy& split, uint64_t run_seed, FieldContractCheck& contracts,
                   std::vector<std::string>& problems) {
  split.set_epoch(0);
  const uint64_t count = std::min<uint64_t>(kSamplesPerSplit, split.size());
  std::string first_fields;
  for (uint64_t i = 0; i < count; ++i) {
    const tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, sample_seed(run_seed, 0, 0, i)};
    const NamedTensors a = split.get(i, ctx);
    const NamedTensors b = split.get(i, ctx);
    // The same sample as loader thread 2 of 3 would read it: only ctx->worker differs.
    tp_worker_ctx_t other_thread = ctx;
    other_thread.worker = 2;
    other_thread.num_workers = 3;
    const NamedTensors c = split.get(i, other_thread);
    const std::string where = split.name() + " sample " + std::to_string(i);
    if (const std::string diff = first_difference(a, b); !diff.empty())
      problems.push_back(where + ": two reads with the same context differ in " + diff +
                         " (PLG-8: a sample is a function of config, split and index; randomness only from "
                         "ctx->seed, never rand(), time or global state)");
    else if (const std::string by_thread = first_difference(a, c); !by_thread.empty())
      problems.push_back(where + ": " + by_thread + " differs when loader thread 2 of 3 reads it instead of "
                         "thread 0 of 1 (it depends on ctx->worker; PLG-8: only ctx->seed may vary a sample)");
    contracts.add(a, where);
    const std::string fields = describe(a, split.batch_layout());
    if (i == 0) first_fields = fields;
    else if (fields != first_fields)
      problems.push_back(where + " has fields {" + fields + "}, sample 0 {" + first_fields +
                         "} (every sample of a split has the same names, dtypes and shapes)");
    for (const auto& [name, tensor] : a) {
      if (!tensor.is_floating_point() && !tensor.is_complex()) continue;
      const int64_t bad = tensor.numel() - at::isfinite(tensor).sum().item<int64_t>();
      if (bad > 0)
        problems.push_back(where + ", field '" + name + "': " + std::to_string(bad) + " of " +
                           std::to_string(tensor.numel()) + " values are NaN or Inf");
    }
  }
}

/// The first kBatchesCompared training batches as a run's loader delivers them with `workers`.
std::vector<NamedTensors> first_batches(const std::shared_ptr<DatasetProxy>& split, const RunConfig& config,
                                        int64_t workers) {
  DataLoader loader(split, LoaderOptions()
                               .batch_size(config.train.batch_size)
                               .num_workers(workers)
                               .prefetch(config.data.prefetch)
                               .drop_last(config.train.drop_last)
                               .shuffle(config.data.shuffle)
                               .seed(static_cast<uint64_t>(config.run.seed)));
  loader.start_epoch(0);
  std::vector<NamedTensors> batches;
  while (static_cast<int64_t>(batches.size()) < kBatchesCompared) {
    std::optional<NamedTensors> batch = loader.next();
    if (!batch) break;
    batches.push_back(std::move(*batch));
  }
  return batches;
}

void check_workers(const std::shared_ptr<DatasetProxy>& split, const RunConfig& config,
                   std::vector<std::string>& problems) {
  const std::vector<NamedTensors> reference = first_batches(split, config, kWorkerCounts[0]);
  for (size_t w = 1; w < std::size(kWorkerCounts); ++w) {
    const std::vector<NamedTensors> batches = first_batches(split, config, kWorkerCounts[w]);
    for (size_t k = 0; k < std::min(reference.size(), batches.size()); ++k)
      if (const std::string diff = first_difference(reference[k], batches[k]); !diff.empty()) {
        problems.push_back(split->name() + " batch " + std::to_string(k) + ": " + diff + " differs between " +
                           "num_workers 0 and " + std::to_string(kWorkerCounts[w]) +
                           " (a sample depends on the loader thread, ctx->worker, or on state shared between "
                           "threads; PLG-8, PLG-10)");
        break;
      }
  }
}

}  // namespace

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor x = a.contiguous();
  const at::Tensor y = b.contiguous();
  // memcmp, not at::equal: NaN equals itself here, and -0.0 differs from 0.0.
  return x.nbytes() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

std::string first_difference(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return "the number of fields";
  for (size_t f = 0; f < a.size(); ++f) {
    if (a[f].first != b[f].first) return "the field names";
    if (!same_bits(a[f].second, b[f].second)) return "field '" + a[f].first + "'";
  }
  return "";
}

std::optional<uint64_t> first_sample_differing_by_rank(DatasetProxy& split, uint64_t run_seed) {
  split.set_epoch(0);
  const uint64_t count = std::min<uint64_t>(kSamplesPerSplit, split.size());
  for (uint64_t i = 0; i < count; ++i) {
    const tp_worker_ctx_t rank0{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, sample_seed(run_seed, 0, 0, i)};
    const tp_worker_ctx_t rank1{sizeof(tp_worker_ctx_t), 0, 1, 1, 0, sample_seed(run_seed, 1, 0, i)};
    if (!first_difference(split.get(i, rank0), split.get(i, rank1)).empty()) return i;
  }
  return std::nullopt;
}

CheckResult check_data(VerifyContext& context) {
  RunComponents& parts = context.parts();
  const auto seed = static_cast<uint64_t>(context.config().run.seed);
  std::vector<std::string> problems;
  std::string splits = "train";
  FieldContractCheck contracts(parts.loss->id(), parts.loss->description().contracts);
  check_samples(*parts.train_data, seed, contracts, problems);
  if (parts.val_data) {
    check_samples(*parts.val_data, seed, contracts, problems);
    splits += " and val";
  }
  for (std::string& broken : contracts.problems()) problems.push_back(std::move(broken));
  check_workers(parts.train_data, context.config(), problems);

  CheckResult row("data", "0: bitwise repeats, finite");
  row.measured = std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems");
  if (problems.empty()) {
    row.reason = splits + ": the first " + std::to_string(kSamplesPerSplit) +
                 " samples read twice are identical, with stable fields and no NaN/Inf" +
                 (contracts.empty() ? "" : ", keeping the loss's field contracts") + "; the first " +
                 std::to_string(kBatchesCompared) + " training batches are identical for num_workers 0, 1 and 3";
    return row;
  }
  row.status = Status::kFail;
  row.reason = problems.front();
  for (size_t i = 1; i < problems.size() && i < kNotesShown; ++i) row.notes.emplace_back(problems[i]);
  if (problems.size() > kNotesShown)
    row.notes.emplace_back("... and " + std::to_string(problems.size() - kNotesShown) + " more");
  return row;
}

}  // namespace tp::cli::verify
