#include "tp/framework/plugin/dataset_proxy.h"

#include <ATen/DLConvertor.h>

#include <array>

#include "config_adapter.h"
#include "sized_copy.h"
#include "tp/framework/error.h"
#include "tp/framework/util/plugin_crash.h"

namespace tp {
namespace {
constexpr uint32_t kMaxFields = 64;
}  // namespace

DatasetProxy::DatasetProxy(ComponentEntry entry, const ComponentConfig& config, std::string split)
    : PluginInstance(std::move(entry)),
      table_(detail::sized_copy<tp_dataset_v1_t>(info_->interface_table)),
      split_(std::move(split)) {
  auto view = detail::make_config_view(config);
  check(table_.create(library_->host(), view->view(), split_.c_str(), &self_), "create", "split '" + split_ + "'");
  try {
    check(table_.size(self_, &size_), "size");
  } catch (...) {
    table_.destroy(self_); // the destructor does not run for a throwing constructor
    throw;
  }
}

DatasetProxy::~DatasetProxy() { table_.destroy(self_); }

void DatasetProxy::set_epoch(uint64_t epoch) {
  if (table_.set_epoch != nullptr) check(table_.set_epoch(self_, epoch), "set_epoch");
}

NamedTensors DatasetProxy::get(uint64_t index, const tp_worker_ctx_t& ctx) const {
  std::array<tp_field_t, kMaxFields> fields{};
  uint32_t count = 0;
  tp_status status = TP_OK;
  {
    // A crash inside get_sample is reported with this component and index (util/plugin_crash.h).
    const PluginCallScope crash_scope(id().c_str(), "get_sample", index);
    status = table_.get_sample(self_, index, &ctx, fields.data(), kMaxFields, &count);
  }
  check(status, "get_sample", "sample " + std::to_string(index) + " of split '" + split_ + "'");
  NamedTensors sample;
  sample.reserve(count);
  for (uint32_t i = 0; i < count && i < kMaxFields; ++i) {
    DLManagedTensor* managed = fields[i].tensor;
    // A field without a deleter could never be freed: refused, not leaked once per sample (PLG-9).
    if (managed == nullptr || fields[i].name == nullptr || managed->deleter == nullptr) {
      for (uint32_t j = i + 1; j < count; ++j)
        if (fields[j].tensor != nullptr && fields[j].tensor->deleter != nullptr) fields[j].tensor->deleter(fields[j].tensor);
      throw PluginError(id(), "get_sample", "plugin component '" + id() + "' returned field " + std::to_string(i) +
                                                " of sample " + std::to_string(index) +
                                                (managed != nullptr && fields[i].name != nullptr
                                                     ? " ('" + std::string(fields[i].name) + "') with a NULL DLPack deleter (PLG-9)."
                                                     : " without a name or tensor."));
    }
    // The deleter is plugin code: capturing the library keeps it loaded until the last view of
    // this buffer is gone (usually right after collation copies it into the batch).
    auto library = library_;
    sample.emplace_back(fields[i].name, at::fromDLPack(managed, [managed, library](void*) {
                          if (managed->deleter != nullptr) managed->deleter(managed);
                        }));
  }
  return sample;
}

}  // namespace tp
