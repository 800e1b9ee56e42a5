#include "plugin_check_dataset.h"

#include <ATen/DLConvertor.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "check_sample_choice.h"
#include "config_adapter.h"
#include "dlpack_check.h"
#include "encoded_sample_check.h"
#include "plugin_check_fields.h"
#include "sized_copy.h"
#include "tp/framework/data/collate.h"
#include "tp/framework/data/field_contracts.h"
#include "tp/framework/data/sampler.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/iface/dataset.h"

namespace tp::detail {
namespace {

constexpr uint32_t kMaxFields = 64; // as DatasetProxy offers
// The samples read that are also batched together at the end of a split's check.
constexpr std::size_t kCollatedSamples = 64;

std::string plugin_message() {
  std::string message = HostServices::take_last_error();
  return message.empty() ? "(the plugin gave no message)" : message;
}

/// The fields a get_sample handed over; each deleter runs once, when this dies, unless the field
/// was adopted by a tensor first. A field without a deleter cannot be freed: it leaks (PLG-9).
struct HandedOver {
  std::array<tp_field_t, kMaxFields> fields{};
  uint32_t count = 0;
  HandedOver() = default;
  HandedOver(const HandedOver&) = delete;
  HandedOver& operator=(const HandedOver&) = delete;
  ~HandedOver() {
    for (uint32_t i = 0; i < std::min(count, kMaxFields); ++i)
      if (fields[i].tensor != nullptr && fields[i].tensor->deleter != nullptr) fields[i].tensor->deleter(fields[i].tensor);
  }
};

/// A sample the plugin refused (get_sample returned a failing status): a bad file, which a run's
/// data.on_bad_sample stops at or skips. The check reads on past it, to list every one (data trial
/// F2: a share with 4 bad files took 4 runs); any other broken rule is the plugin's fault (Error).
class SampleRefused : public Error {
 public:
  using Error::Error;
};

/// One sample as the checker compares it: its fields' shapes and their values.
struct Sample {
  std::vector<FieldShape> shapes;
  std::vector<at::Tensor> values;
  /// The fields as the loader holds them.
  NamedTensors named() const {
    NamedTensors out;
    for (std::size_t i = 0; i < values.size(); ++i) out.emplace_back(shapes[i].name, values[i]);
    return out;
  }
  /// Throws unless `other`, the same index read again with the same seed, is equal (PLG-8).
  void expect_equal(const Sample& other, const std::string& where) const {
    for (std::size_t i = 0; i < values.size(); ++i)
      if (other.shapes != shapes || !at::equal(values[i], other.values[i]))
        throw Error(where + " differs between two calls with the same worker seed (field '" + shapes[i].name +
                    "'): a sample is a function of the config, the index and ctx->seed (PLG-8)");
  }
};

/// One split of the dataset, created and destroyed through the raw table.
class SplitUnderCheck {
 public:
  SplitUnderCheck(const ComponentEntry& entry, const ComponentConfig& config, std::string split, const CheckOptions& options)
      : info_(*entry.info),
        table_(sized_copy<tp_dataset_v1_t>(info_.interface_table)),
        split_(std::move(split)),
        options_(options) {
    const std::string call = "create on split '" + split_ + "'";
    const auto view = make_config_view(config);
    tp_status status = TP_OK;
    {
      const PluginCallScope scope(info_.id.c_str(), call.c_str(), UINT64_MAX);
      status = table_.create(entry.library->host(), view->view(), split_.c_str(), &self_);
    }
    if (status != TP_OK) throw Error(call + " failed with " + status_name(status) + ": " + plugin_message());
    if (self_ == nullptr) throw Error(call + " returned TP_OK but no instance");
    try {
      guarded("size", [&] { return table_.size(self_, &size_); });
      if (table_.set_epoch != nullptr) guarded("set_epoch", [&] { return table_.set_epoch(self_, options_.epoch); });
      read_layout();
      check_groups();
      read_encoded_images();
      check_class_names();
      check_sample_keys();
    } catch (...) {
      destroy(); // the destructor does not run for a throwing constructor
      throw;
    }
  }
  ~SplitUnderCheck() { destroy(); }
  SplitUnderCheck(const SplitUnderCheck&) = delete;
  SplitUnderCheck& operator=(const SplitUnderCheck&) = delete;

  uint64_t size() const { return size_; }
  /// The fields the split declares pad or ragged (ABI 1.6; empty: every field stacks).
  const BatchLayout& layout() const { return layout_; }
  /// The image fields the split can hand over encoded (ABI 1.11; empty: none declared).
  const std::vector<EncodedImageSpec>& encoded_images() const { return encoded_; }

  /// Reads sample `index`, asking for encoded images when `encoded` (ABI 1.11); throws naming the
  /// call, split and index for any broken field rule.
  Sample read(uint64_t index, bool encoded = false) const {
    const std::string call = "get_sample on split '" + split_ + "'";
    const std::string where = "get_sample at index " + std::to_string(index) + " of split '" + split_ + "'" +
                              (encoded ? " with encoded_images = 1" : "");
    HandedOver out;
    tp_worker_ctx_t ctx = context(index);
    ctx.encoded_images = encoded ? 1U : 0U;
    tp_status status = TP_OK;
    {
      const PluginCallScope scope(info_.id.c_str(), call.c_str(), index);
      status = table_.get_sample(self_, index, &ctx, out.fields.data(), kMaxFields, &out.count);
    }
    if (status != TP_OK) {
      out.count = 0; // on error nothing was handed over
      throw SampleRefused(where + " failed with " + status_name(status) + ": " + plugin_message());
    }
    if (out.count > kMaxFields)
      throw Error(where + " reported " + std::to_string(out.count) + " fields; the capacity was " + std::to_string(kMaxFields));
    Sample sample;
    for (uint32_t i = 0; i < out.count; ++i) {
      tp_field_t& field = out.fields[i];
      const std::string which = where + ": field " + std::to_string(i) +
                                (field.name != nullptr ? " ('" + std::string(field.name) + "')" : "");
      if (field.name == nullptr || field.tensor == nullptr) throw Error(which + " has no name or no tensor");
      for (uint32_t j = 0; j < i; ++j)
        if (std::strcmp(out.fields[j].name, field.name) == 0)
          throw Error(which + " repeats the name of field " + std::to_string(j) + ": each field of a sample needs its "
                              "own name, the one the model, loss and metrics read it by (a run refuses the sample); "
                              "rename one");
      if (field.tensor->deleter == nullptr)
        throw Error(which + " has a NULL DLPack deleter: the host frees every field through its deleter, so this "
                            "one leaks in every step (PLG-9)");
      const DLTensor& t = field.tensor->dl_tensor;
      // The validation training applies too (dlpack_check.h).
      if (const std::string problem = detail::dlpack_problem(t); !problem.empty()) throw Error(which + " " + problem);
      FieldShape shape{field.name, t.dtype, std::vector<int64_t>(t.shape, t.shape + t.ndim)};
      try {
        sample.values.push_back(at::fromDLPack(field.tensor)); // adopts it: the tensor runs the deleter
        field.tensor = nullptr;
      } catch (const std::exception& e) {
        throw Error(which + " (" + shape.text() + ") is not a tensor the host can read: " + e.what());
      }
      sample.shapes.push_back(std::move(shape));
    }
    return sample;
  }

  /// Asks for the sample just past the end, which must fail (the loader never asks, but an
  /// index off by one in an author's own sampler or a resized split would read garbage).
  void expect_past_end_refused() const {
    const std::string call = "get_sample on split '" + split_ + "'";
    HandedOver out;
    const tp_worker_ctx_t ctx = context(size_);
    tp_status status = TP_OK;
    {
      const PluginCallScope scope(info_.id.c_str(), call.c_str(), size_);
      status = table_.get_sample(self_, size_, &ctx, out.fields.data(), kMaxFields, &out.count);
    }
    (void)HostServices::take_last_error();
    if (status == TP_OK)
      throw Error("get_sample at index " + std::to_string(size_) + " of split '" + split_ + "' (size() is " +
                  std::to_string(size_) + ") returned TP_OK: an index past the end must fail with TP_ERR_OUT_OF_RANGE");
    out.count = 0;
  }

 private:
  void read_layout() {
    if (table_.field_batching == nullptr) return;
    const tp_field_batching_t* entries = nullptr;
    uint32_t count = 0;
    guarded("field_batching", [&] { return table_.field_batching(self_, &entries, &count); });
    try {
      layout_ = DatasetProxy::parse_field_batching(entries, count);
    } catch (const Error& e) {
      throw Error("field_batching on split '" + split_ + "' is malformed: " + e.what());
    }
  }

  // A declaration the loader would refuse fails the check here (ABI 1.10).
  void check_groups() {
    if (table_.sample_groups == nullptr || size_ == 0) return;
    const uint64_t* ends = nullptr;
    uint64_t count = 0;
    guarded("sample_groups", [&] { return table_.sample_groups(self_, &ends, &count); });
    try {
      (void)DatasetProxy::parse_sample_groups(ends, count, size_);
    } catch (const Error& e) {
      throw Error("sample_groups on split '" + split_ + "' is malformed: " + e.what());
    }
  }

  // A declaration the loader would refuse fails the check here (ABI 1.11).
  void read_encoded_images() {
    if (table_.encoded_images == nullptr) return;
    const tp_encoded_image_t* entries = nullptr;
    uint32_t count = 0;
    guarded("encoded_images", [&] { return table_.encoded_images(self_, &entries, &count); });
    try {
      encoded_ = DatasetProxy::parse_encoded_images(entries, count);
    } catch (const Error& e) {
      throw Error("encoded_images on split '" + split_ + "' is malformed: " + e.what());
    }
  }

  // A declaration the loader would refuse fails the check here (ABI 1.12).
  void check_class_names() {
    if (table_.class_names == nullptr) return;
    const tp_class_names_t* lent = nullptr;
    guarded("class_names", [&] { return table_.class_names(self_, &lent); });
    try {
      (void)DatasetProxy::parse_class_names(lent);
    } catch (const Error& e) {
      throw Error("class_names on split '" + split_ + "' is malformed: " + e.what());
    }
  }

  // A list host predict would refuse fails the check here (ABI 1.13).
  void check_sample_keys() {
    if (table_.sample_keys == nullptr) return;
    const char* const* keys = nullptr;
    uint64_t count = 0;
    guarded("sample_keys", [&] { return table_.sample_keys(self_, &keys, &count); });
    try {
      (void)DatasetProxy::parse_sample_keys(keys, count, size_);
    } catch (const Error& e) {
      throw Error("sample_keys on split '" + split_ + "' is malformed: " + e.what());
    }
  }

  void destroy() {
    const std::string call = "destroy on split '" + split_ + "'";
    const PluginCallScope scope(info_.id.c_str(), call.c_str(), UINT64_MAX);
    table_.destroy(self_);
  }

  template <typename Call>
  void guarded(const char* function, Call call) {
    // Appended piece by piece: GCC 12 at -O2 reports a false -Warray-bounds on the chained
    // operator+ form of this concatenation.
    std::string name = function;
    name.append(" on split '").append(split_).append("'");
    tp_status status = TP_OK;
    {
      const PluginCallScope scope(info_.id.c_str(), name.c_str(), UINT64_MAX);
      status = call();
    }
    if (status != TP_OK) throw Error(name + " failed with " + status_name(status) + ": " + plugin_message());
  }

  tp_worker_ctx_t context(uint64_t index) const {
    // The seed a training run with run.seed = options_.seed gives this sample on rank 0.
    return tp_worker_ctx_t{sizeof(tp_worker_ctx_t), 0, 1, 0, options_.epoch, sample_seed(options_.seed, 0, options_.epoch, index)};
  }

  const ComponentInfo& info_;
  tp_dataset_v1_t table_{};
  std::string split_;
  const CheckOptions& options_;
  void* self_ = nullptr;
  uint64_t size_ = 0;
  BatchLayout layout_;
  std::vector<EncodedImageSpec> encoded_;
};

/// ABI 1.11: index `index`'s pixel sample `pixels` against the split's declaration and, when a field
/// is available, the same index read encoded, twice alike; what the summary says of it.
std::string check_encoded(const SplitUnderCheck& data, uint64_t index, const Sample& pixels, const std::string& where) {
  const std::vector<EncodedImageSpec>& specs = data.encoded_images();
  if (specs.empty()) return "";
  if (const std::string problem = pixel_sample_problem(specs, pixels.named()); !problem.empty())
    throw Error(where + ": " + problem);
  const std::string text = ", encoded images: " + encoded_images_text(specs);
  if (std::none_of(specs.begin(), specs.end(), [](const EncodedImageSpec& s) { return s.available; })) return text;
  const Sample a = data.read(index, /*encoded=*/true);
  if (const std::string problem = encoded_sample_problem(specs, pixels.named(), a.named()); !problem.empty())
    throw Error(where + " with encoded_images = 1: " + problem);
  a.expect_equal(data.read(index, /*encoded=*/true), where + " with encoded_images = 1");
  return text + ", index " + std::to_string(index) + " read encoded alike";
}

// Field names a reader takes for a class label (cross_entropy's, accuracy's and f1's `target`
// default is "label"); compared without case.
bool named_like_a_label(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static constexpr std::array<std::string_view, 12> kNames = {"label", "labels", "target",   "targets", "class", "classes",
                                                              "class_id", "class_idx", "cls", "category", "y", "gt_label"};
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

// A float scalar named like a class label: the loss and metrics that read class indices need an
// integer dtype, and the run would fail at its first step (or a regression target was meant as
// [1]). A warning, not a failure: the field may be a regression target after all.
void warn_float_labels(const std::vector<FieldShape>& fields, const std::string& split, std::vector<std::string>& warnings) {
  for (const FieldShape& f : fields) {
    const bool floating = f.dtype.code == kDLFloat || f.dtype.code == kDLBfloat;
    if (!floating || !f.shape.empty() || !named_like_a_label(f.name)) continue;
    const std::string text = "field '" + f.name + "' is a " + dtype_text(f.dtype) + " scalar (split '" + split +
                             "'); a class label needs an integer dtype: cross_entropy, accuracy and f1 read class "
                             "indices and refuse it. Give it as int64 (tp::cpp::Sample::add with an int64_t, or "
                             "DLPack kDLInt 64); a regression target is better given as shape [1]";
    // Once per field, not once per split.
    if (std::none_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.starts_with("field '" + f.name + "' "); }))
      warnings.push_back(text);
  }
}

/// What one split's check found: its summary, and each sample the plugin refused (the plugin's
/// message, which names the file) in index order.
struct SplitResult {
  std::string summary;
  std::vector<std::string> refused;
};

SplitResult check_split(const ComponentEntry& entry, const ComponentConfig& config, const std::string& split,
                        const CheckOptions& options, std::vector<std::string>& warnings) {
  SplitUnderCheck data(entry, config, split, options);
  if (data.size() == 0) return {split + ": size() is 0, nothing read", {}};
  // The first sample read's fields, which every other sample must match; the sizes a pad or
  // ragged field may vary in are "any".
  std::vector<FieldShape> fields;
  std::optional<uint64_t> first_read;
  std::string skipped, encoded;
  std::vector<std::string> refused;
  std::vector<NamedTensors> samples; // every sample read, collated at the end as the loader would
  const std::vector<uint64_t> indices = indices_to_read(data.size(), options, skipped);
  FieldContractCheck contracts(options.contract_loss, options.contracts);
  for (uint64_t index : indices) {
    std::optional<Sample> read;
    try {
      read.emplace(data.read(index));
    } catch (const SampleRefused& e) {
      refused.emplace_back(e.what());
      continue;
    }
    const Sample& a = *read;
    const Sample b = data.read(index);
    const std::string where = "get_sample at index " + std::to_string(index) + " of split '" + split + "'";
    if (!contracts.empty()) {
      contracts.add(a.named(), split + " sample " + std::to_string(index));
    }
    const std::vector<FieldShape> declared = as_declared(a.shapes, data.layout());
    if (!first_read) {
      first_read = index;
      fields = declared;
      encoded = check_encoded(data, index, a, where);
    } else if (declared != fields) {
      throw Error(where + " gave " + fields_text(a.shapes) + ", but index " + std::to_string(*first_read) + " gave " +
                  fields_text(fields, data.layout()) + ": every sample has the same field names, dtypes and shapes "
                  "(the loader stacks them into batches), but for the sizes field_batching (ABI 1.6) lets vary");
    }
    // The first samples are batched at the end (enough to find what breaks a batch; all of a
    // --samples all split would hold the dataset in memory).
    if (samples.size() < kCollatedSamples) {
      samples.push_back(a.named());
    }
    a.expect_equal(b, where);
  }
  if (const std::vector<std::string> broken = contracts.problems(); !broken.empty()) {
    std::string message = "split '" + split + "', held to the run's loss's field contracts:";
    for (const std::string& problem : broken) message += " " + problem;
    throw Error(message);
  }
  data.expect_past_end_refused();
  warn_float_labels(fields, split, warnings);
  // The samples read, batched as the loader batches them: what a pad value or a declared field
  // the samples lack breaks shows here rather than in the first training step.
  CollateOptions collate_options;
  collate_options.layout = &data.layout();
  const std::size_t read = samples.size();
  if (read > 0) {
    try {
      (void)collate(std::move(samples), collate_options);
    } catch (const Error& e) {
      throw Error("the " + std::to_string(read) + " samples read from split '" + split +
                  "' do not form a batch: " + e.what());
    }
  }
  const std::string failed = refused.empty() ? "" : " (" + std::to_string(refused.size()) + " refused)";
  return {split + ": " + std::to_string(data.size()) + " samples, " + indices_text(indices, data.size()) +
              " read" + failed + " twice alike" +
              (skipped.empty() ? "" : " (--index " + skipped + " past the end, not read)") + ", fields " +
              fields_text(fields, data.layout()) + encoded + ", batched alike, index " + std::to_string(data.size()) +
              " refused",
          std::move(refused)};
}

/// The failure of a check whose splits read every other rule well but refused some samples: each
/// refusal on a line of its own (the plugin's message names the file and why), then the count,
/// and what a run does with them.
std::string refused_samples_text(const std::string& summary, const std::vector<std::string>& refused,
                                 const std::string& per_split) {
  std::string text = std::to_string(refused.size()) + " sample" + (refused.size() == 1 ? "" : "s") +
                     " could not be read (" + per_split + "):";
  for (const std::string& one : refused) text += "\n      " + one;
  return text + "\n      " + std::to_string(refused.size()) + " bad sample" + (refused.size() == 1 ? "" : "s") +
         " in all. A run stops at the first under data.on_bad_sample = \"fail\" (the default) and leaves them out "
         "under \"skip\" (host shards write too); fix the files to keep them. The rest of the check passed: " + summary;
}

// Whether the dataset serves "test": plugin ABI 1.5 added the split, and a dataset without one
// refuses create("test") with TP_ERR_UNSUPPORTED (the C++ adapter, unless the class declares
// kHasTestSplit). Another refusal is returned in `refusal`: the split exists but these options
// do not make it (image_folder without test_root).
bool serves_test_split(const ComponentEntry& entry, const ComponentConfig& config, std::string& refusal) {
  const tp_version_t abi = entry.library->abi();
  if (abi.major == 1 && abi.minor < 5) return false;
  const auto table = sized_copy<tp_dataset_v1_t>(entry.info->interface_table);
  const auto view = make_config_view(config);
  void* self = nullptr;
  tp_status status = TP_OK;
  {
    const PluginCallScope scope(entry.info->id.c_str(), "create on split 'test'", UINT64_MAX);
    status = table.create(entry.library->host(), view->view(), "test", &self);
    if (status == TP_OK) table.destroy(self);
  }
  const std::string message = plugin_message();
  if (status == TP_OK || status == TP_ERR_UNSUPPORTED) return status == TP_OK;
  refusal = std::string("create on split 'test' failed with ") + status_name(status) + ": " + message;
  return false;
}

}  // namespace

DatasetCheck check_dataset(const ComponentEntry& entry, const ComponentConfig& train, const ComponentConfig& val,
                           const ComponentConfig& test, const CheckOptions& options) {
  DatasetCheck result;
  std::vector<std::string> refused;
  std::string per_split;
  // One statement per split: the splits are checked, and their warnings found, in this order. A
  // split's refused samples do not stop the others: the list is meant to be complete.
  const auto add = [&](SplitResult split, const char* name) {
    result.summary += (result.summary.empty() ? "" : "; ") + split.summary;
    per_split += std::string(per_split.empty() ? "" : ", ") + name + " " + std::to_string(split.refused.size());
    for (std::string& one : split.refused) refused.push_back(std::move(one));
  };
  add(check_split(entry, train, "train", options, result.warnings), "train");
  add(check_split(entry, val, "val", options, result.warnings), "val");
  std::string refusal;
  if (serves_test_split(entry, test, refusal)) {
    add(check_split(entry, test, "test", options, result.warnings), "test");
  } else if (!refusal.empty()) {
    result.warnings.push_back("the test split was not checked: " + refusal +
                              ". Give its options with --config (the run's [data.test] table, or [data.train] with "
                              "data.test_from_train) or --set");
  } else {
    result.summary += "; no test split";
  }
  if (!refused.empty()) throw Error(refused_samples_text(result.summary, refused, per_split));
  return result;
}

}  // namespace tp::detail
