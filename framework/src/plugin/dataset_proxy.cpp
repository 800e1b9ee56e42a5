#include "tp/framework/plugin/dataset_proxy.h"

#include <ATen/DLConvertor.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstring>
#include <utility>

#include "config_adapter.h"
#include "dlpack_check.h"
#include "sized_copy.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/plugin_crash.h"

namespace tp {
namespace {
constexpr uint32_t kMaxFields = 64;
}  // namespace

DatasetProxy::DatasetProxy(ComponentEntry entry, const ComponentConfig& config, std::string split)
    : PluginInstance(std::move(entry)),
      table_(detail::sized_copy<tp_dataset_v1_t>(info_->interface_table)),
      split_(std::move(split)) {
  const tp_version_t abi = library_->abi();
  if (split_ == "test" && abi.major == 1 && abi.minor < 5)
    throw PluginError(id(), "create",
                      "plugin component '" + id() + "' (" + library_->path().filename().string() +
                          ") was built for plugin ABI 1." + std::to_string(abi.minor) +
                          ", which has no test split (ABI 1.5 added it): rebuild the plugin against this host's "
                          "plugin_api, or evaluate the table as [data.val] instead.");
  auto view = detail::make_config_view(config);
  const tp_status status = in_plugin_call(
      id().c_str(), "create", [&] { return table_.create(library_->host(), view->view(), split_.c_str(), &self_); });
  check_create(status, self_, "split '" + split_ + "'" + (config.key_path.empty() ? "" : " ([" + config.key_path + "])"));
  try {
    check(table_.size(self_, &size_), "size");
    layout_ = read_field_batching();
    group_ends_ = read_sample_groups();
    encoded_ = read_encoded_images();
    classes_ = read_class_names();
  } catch (...) {
    in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); // the destructor does not run for a throwing constructor
    throw;
  }
}

DatasetProxy::~DatasetProxy() { in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); }

BatchLayout DatasetProxy::read_field_batching() const {
  if (table_.field_batching == nullptr) return {};  // NULL, or a table from before ABI 1.6
  const tp_field_batching_t* entries = nullptr;
  uint32_t count = 0;
  check(table_.field_batching(self_, &entries, &count), "field_batching");
  try {
    return parse_field_batching(entries, count);
  } catch (const Error& e) {
    throw PluginError(id(), "field_batching",
                      "plugin component '" + id() + "' declared its variable-size fields wrongly: " + e.what() +
                          " (plugin_api/README.md, \"Variable-size fields\").");
  }
}

std::vector<uint64_t> DatasetProxy::read_sample_groups() const {
  if (table_.sample_groups == nullptr || size_ == 0) return {};  // NULL, or a table from before ABI 1.10
  const uint64_t* ends = nullptr;
  uint64_t count = 0;
  check(table_.sample_groups(self_, &ends, &count), "sample_groups");
  try {
    return parse_sample_groups(ends, count, size_);
  } catch (const Error& e) {
    throw PluginError(id(), "sample_groups",
                      "plugin component '" + id() + "' declared its sample groups wrongly on split '" + split_ +
                          "': " + e.what() + " (plugin_api/include/tp/iface/dataset.h, sample_groups).");
  }
}

std::vector<EncodedImageSpec> DatasetProxy::read_encoded_images() const {
  if (table_.encoded_images == nullptr) return {};  // NULL, or a table from before ABI 1.11
  const tp_encoded_image_t* entries = nullptr;
  uint32_t count = 0;
  check(table_.encoded_images(self_, &entries, &count), "encoded_images");
  try {
    return parse_encoded_images(entries, count);
  } catch (const Error& e) {
    throw PluginError(id(), "encoded_images",
                      "plugin component '" + id() + "' declared its encoded images wrongly on split '" + split_ +
                          "': " + e.what() + " (plugin_api/include/tp/iface/dataset.h, tp_encoded_image_t).");
  }
}

ClassNames DatasetProxy::read_class_names() const {
  if (table_.class_names == nullptr) return {};  // NULL, or a table from before ABI 1.12
  const tp_class_names_t* lent = nullptr;
  check(table_.class_names(self_, &lent), "class_names");
  try {
    return parse_class_names(lent);
  } catch (const Error& e) {
    throw PluginError(id(), "class_names",
                      "plugin component '" + id() + "' (" + library_->path().filename().string() +
                          ") lent its class names wrongly on split '" + split_ + "': " + e.what() +
                          " (plugin_api/include/tp/iface/dataset.h, tp_class_names_t).");
  }
}

ClassNames DatasetProxy::parse_class_names(const tp_class_names_t* lent) {
  if (lent == nullptr) return {};
  TP_CHECK(lent->struct_size >= sizeof(tp_class_names_t), "struct_size ", lent->struct_size,
           " is smaller than tp_class_names_t (", sizeof(tp_class_names_t), " bytes)");
  TP_CHECK(lent->field != nullptr && lent->field[0] != '\0', "no label field is named");
  ClassNames out{lent->field, {}};
  TP_CHECK(lent->count <= kMaxClassNames, lent->count, " class names (at most ", kMaxClassNames, ")");
  TP_CHECK(lent->count == 0 || lent->names != nullptr, lent->count, " class names at a NULL pointer");
  out.names.reserve(lent->count);
  for (uint32_t i = 0; i < lent->count; ++i) {
    TP_CHECK(lent->names[i] != nullptr, "the name of class ", i, " is NULL");
    // Bounded before it is copied: a name without its terminator must not be read to the end of memory.
    const std::size_t length = strnlen(lent->names[i], kMaxClassNameBytes + 1);
    out.names.emplace_back(lent->names[i], length);
  }
  check_class_names(out);
  return out;
}

std::vector<std::string> DatasetProxy::sample_keys() const {
  if (table_.sample_keys == nullptr) return {};  // NULL, or a table from before ABI 1.13
  const char* const* keys = nullptr;
  uint64_t count = 0;
  check(in_plugin_call(id().c_str(), "sample_keys", [&] { return table_.sample_keys(self_, &keys, &count); }),
        "sample_keys");
  try {
    return parse_sample_keys(keys, count, size_);
  } catch (const Error& e) {
    throw PluginError(id(), "sample_keys",
                      "plugin component '" + id() + "' (" + library_->path().filename().string() +
                          ") named its samples wrongly on split '" + split_ + "': " + e.what() +
                          " (plugin_api/include/tp/iface/dataset.h, sample_keys).");
  }
}

std::vector<std::string> DatasetProxy::parse_sample_keys(const char* const* keys, uint64_t count, uint64_t size) {
  TP_CHECK(count == size, count, " names for ", size, " samples (one per sample, in index order)");
  TP_CHECK(count == 0 || keys != nullptr, count, " names at a NULL pointer");
  std::vector<std::string> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (keys[i] == nullptr) {
      out.emplace_back();
      continue;
    }
    // Bounded before it is copied: a name without its terminator must not be read to the end of memory.
    const std::size_t length = strnlen(keys[i], kMaxSampleKeyBytes + 1);
    TP_CHECK(length <= kMaxSampleKeyBytes, "the name of sample ", i, " is longer than ", kMaxSampleKeyBytes, " bytes");
    out.emplace_back(keys[i], length);
  }
  return out;
}

std::vector<EncodedImageSpec> DatasetProxy::parse_encoded_images(const tp_encoded_image_t* entries, uint32_t count) {
  if (count == 0) return {};
  TP_CHECK(entries != nullptr, count, " entries at a NULL pointer");
  const uint32_t stride = entries->struct_size;  // PLG-2, as parse_field_batching
  TP_CHECK(stride >= sizeof(tp_encoded_image_t), "struct_size ", stride, " is smaller than tp_encoded_image_t (",
           sizeof(tp_encoded_image_t), " bytes)");
  std::vector<EncodedImageSpec> out;
  const auto* bytes = reinterpret_cast<const unsigned char*>(entries);
  for (uint32_t i = 0; i < count; ++i) {
    tp_encoded_image_t entry{};
    std::memcpy(&entry, bytes + static_cast<std::size_t>(i) * stride, sizeof entry);
    TP_CHECK(entry.name != nullptr && entry.name[0] != '\0', "entry ", i, " has no name");
    EncodedImageSpec spec;
    spec.name = entry.name;
    for (const EncodedImageSpec& earlier : out) TP_CHECK(earlier.name != spec.name, "field '", spec.name, "' twice");
    spec.available = entry.available != 0;
    if (spec.available) {
      TP_CHECK(entry.reason == nullptr, "field '", spec.name,
               "' is available but has a reason (set reason only when available is 0)");
      TP_CHECK(entry.out_height > 0 && entry.out_width > 0, "field '", spec.name, "' is available with output size ",
               entry.out_height, "x", entry.out_width, " (both must be > 0)");
      for (int c = 0; c < 3; ++c)
        TP_CHECK(entry.std[c] != 0.0F, "field '", spec.name, "' has std[", c, "] = 0");
    } else {
      TP_CHECK(entry.reason != nullptr && entry.reason[0] != '\0', "field '", spec.name,
               "' is unavailable without a reason (name the key that prevents it)");
      spec.reason = entry.reason;
    }
    spec.out_height = entry.out_height;
    spec.out_width = entry.out_width;
    for (std::size_t c = 0; c < 3; ++c) {
      spec.mean[c] = entry.mean[c];
      spec.std[c] = entry.std[c];
    }
    spec.channels_last = entry.channels_last != 0;
    out.push_back(std::move(spec));
  }
  return out;
}

std::vector<uint64_t> DatasetProxy::parse_sample_groups(const uint64_t* ends, uint64_t count, uint64_t size) {
  if (size == 0) return {};
  TP_CHECK(count >= 1, "no group for a dataset of ", size, " samples (declare at least one, or none at all)");
  TP_CHECK(ends != nullptr, count, " group ends at a NULL pointer");
  TP_CHECK(count <= size, count, " groups for ", size, " samples: every group holds at least one sample");
  std::vector<uint64_t> out(ends, ends + count);
  for (uint64_t g = 0; g < count; ++g) {
    const uint64_t begin = g == 0 ? 0 : out[g - 1];
    TP_CHECK(out[g] > begin, "group ", g, " ends at ", out[g], ", not after its start ", begin,
             " (ends must increase strictly: leave empty groups out)");
  }
  TP_CHECK(out.back() == size, "the last group ends at ", out.back(), ", not at the dataset's size ", size);
  return out;
}

BatchLayout DatasetProxy::parse_field_batching(const tp_field_batching_t* entries, uint32_t count) {
  if (count == 0) return {};
  TP_CHECK(entries != nullptr, count, " entries at a NULL pointer");
  // PLG-2: the array's stride is its producer's sizeof, read from the first entry; a later minor
  // may have appended members this host skips.
  const uint32_t stride = entries->struct_size;
  TP_CHECK(stride >= sizeof(tp_field_batching_t), "struct_size ", stride, " is smaller than tp_field_batching_t (",
           sizeof(tp_field_batching_t), " bytes)");
  std::vector<FieldBatching> fields;
  const auto* bytes = reinterpret_cast<const unsigned char*>(entries);
  for (uint32_t i = 0; i < count; ++i) {
    tp_field_batching_t entry{};
    std::memcpy(&entry, bytes + static_cast<std::size_t>(i) * stride, sizeof entry);
    TP_CHECK(entry.name != nullptr && entry.name[0] != '\0', "entry ", i, " has no name");
    TP_CHECK(entry.batching <= TP_BATCH_RAGGED, "field '", entry.name, "' has batching ", entry.batching,
             " (expected TP_BATCH_STACK, TP_BATCH_PAD or TP_BATCH_RAGGED)");
    const Batching batching = entry.batching == TP_BATCH_PAD      ? Batching::kPad
                              : entry.batching == TP_BATCH_RAGGED ? Batching::kRagged
                                                                  : Batching::kStack;
    fields.push_back({entry.name, batching, entry.pad_value});
  }
  return BatchLayout(std::move(fields));
}

bool DatasetProxy::prepare(const ComponentEntry& entry, const ComponentConfig& config, const std::string& split) {
  const auto table = detail::sized_copy<tp_dataset_v1_t>(entry.info->interface_table); // NULL past an old struct_size
  if (table.prepare == nullptr) return false;
  auto view = detail::make_config_view(config);
  const tp_status status = in_plugin_call(entry.info->id.c_str(), "prepare", [&] {
    return table.prepare(entry.library->host(), view->view(), split.c_str());
  });
  check_plugin_call(*entry.info, *entry.library, status, "prepare", "split '" + split + "'");
  return true;
}

void DatasetProxy::set_epoch(uint64_t epoch) {
  if (table_.set_epoch != nullptr) check(table_.set_epoch(self_, epoch), "set_epoch");
}

namespace {

// Owns the DLPack fields a get_sample call wrote until each becomes a tensor: whatever leaves
// get() early (a failed call, a field without a name, a dtype at::fromDLPack refuses) runs the
// deleters of the fields not yet converted, so a bad sample leaks nothing (PLG-9).
class FieldsInFlight {
 public:
  explicit FieldsInFlight(std::array<tp_field_t, kMaxFields>& fields) : fields_(fields) {}
  FieldsInFlight(const FieldsInFlight&) = delete;
  FieldsInFlight& operator=(const FieldsInFlight&) = delete;
  ~FieldsInFlight() {
    for (tp_field_t& field : fields_) release(std::exchange(field.tensor, nullptr));
  }
  /// Field `i`'s tensor, now the caller's to release.
  DLManagedTensor* take(uint32_t i) { return std::exchange(fields_[i].tensor, nullptr); }
  static void release(DLManagedTensor* managed) noexcept {
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }

 private:
  std::array<tp_field_t, kMaxFields>& fields_;
};

}  // namespace

NamedTensors DatasetProxy::get(uint64_t index, const tp_worker_ctx_t& ctx) const {
  std::array<tp_field_t, kMaxFields> fields{};  // zeroed: a slot left NULL holds nothing
  uint32_t count = 0;
  tp_status status = TP_OK;
  {
    // A crash inside get_sample is reported with this component and index (plugin/plugin_crash.h).
    const PluginCallScope crash_scope(id().c_str(), "get_sample", index, ctx.epoch, library_->path().c_str());
    status = table_.get_sample(self_, index, &ctx, fields.data(), kMaxFields, &count);
  }
  FieldsInFlight in_flight(fields);  // every field the plugin wrote is ours, whatever the status
  check(status, "get_sample", "sample " + std::to_string(index) + " of split '" + split_ + "'");
  if (count > kMaxFields)
    throw PluginError(id(), "get_sample", "plugin component '" + id() + "' reported " + std::to_string(count) +
                                              " fields of sample " + std::to_string(index) + " for a capacity of " +
                                              std::to_string(kMaxFields) + ".");
  NamedTensors sample;
  sample.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    // A field without a deleter could never be freed: refused, not leaked once per sample (PLG-9).
    if (fields[i].tensor == nullptr || fields[i].name == nullptr || fields[i].tensor->deleter == nullptr)
      throw PluginError(id(), "get_sample", "plugin component '" + id() + "' returned field " + std::to_string(i) +
                                                " of sample " + std::to_string(index) +
                                                (fields[i].tensor != nullptr && fields[i].name != nullptr
                                                     ? " ('" + std::string(fields[i].name) + "') with a NULL DLPack deleter (PLG-9)."
                                                     : " without a name or tensor."));
    const char* name = fields[i].name;
    // Fields are looked up by name from here on: a second `x` would be dropped silently and the
    // run would train on whichever came first.
    for (uint32_t j = 0; j < i; ++j)
      if (std::strcmp(fields[j].name, name) == 0)
        throw PluginError(id(), "get_sample", "plugin component '" + id() + "' returned field '" + name +
                                                  "' twice in sample " + std::to_string(index) + " (fields " +
                                                  std::to_string(j) + " and " + std::to_string(i) +
                                                  "): each field of a sample needs its own name, the one the model, "
                                                  "loss and metrics read it by. Rename one in the plugin; `host "
                                                  "plugins check <its .so> --index " + std::to_string(index) +
                                                  "` shows the fields.");
    // The same validation as `host plugins check` (dlpack_check.h): LibTorch trusts ndim, shape
    // and strides, so a field that lies about them would be read out of bounds.
    if (const std::string problem = detail::dlpack_problem(fields[i].tensor->dl_tensor); !problem.empty())
      throw PluginError(id(), "get_sample", "plugin component '" + id() + "' returned field '" + name + "' of sample " +
                                                std::to_string(index) + " that " + problem +
                                                "; check the plugin with `host plugins check <its .so> --index " +
                                                std::to_string(index) + "`.");
    DLManagedTensor* managed = in_flight.take(i);
    // The deleter is plugin code: capturing the library keeps it loaded until the last view of
    // this buffer is gone (usually right after collation copies it into the batch).
    auto library = library_;
    at::Tensor tensor;
    try {
      tensor = at::fromDLPack(managed, [managed, library](void*) { FieldsInFlight::release(managed); });
    } catch (const c10::Error& e) {
      // at::fromDLPack refused the field (dtype, device) before taking its deleter.
      FieldsInFlight::release(managed);
      throw PluginError(id(), "get_sample", "plugin component '" + id() + "' returned field '" + name + "' of sample " +
                                                std::to_string(index) + " that LibTorch cannot take: " +
                                                e.what_without_backtrace());
    }
    sample.emplace_back(name, std::move(tensor));
  }
  return sample;
}

}  // namespace tp
