#include "tp/framework/engine/run_components.h"

#include <ATen/Context.h>

#include <algorithm>

#include "tp/framework/config/validate.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

struct Slot {
  ComponentConfig* config;
  int32_t kind;
};

std::vector<Slot> slots_of(RunConfig& c) {
  std::vector<Slot> slots{{&c.model, TP_KIND_MODEL}, {&c.loss, TP_KIND_LOSS}, {&c.data.train, TP_KIND_DATASET}};
  if (c.data.val) slots.push_back({&*c.data.val, TP_KIND_DATASET});
  if (c.data.test) slots.push_back({&*c.data.test, TP_KIND_DATASET});
  for (auto& t : c.data.batch_transforms) slots.push_back({&t, TP_KIND_BATCH_TRANSFORM});
  for (auto& m : c.metrics) slots.push_back({&m, TP_KIND_METRIC});
  for (auto& cb : c.callbacks) slots.push_back({&cb, TP_KIND_CALLBACK});
  return slots;
}

}  // namespace

void resolve_components(RunConfig& config, const Registry& registry) {
  for (const Slot& slot : slots_of(config)) {
    const ComponentEntry entry = registry.find(slot.config->component, slot.kind, slot.config->key_path);
    validate_component(*slot.config, entry.info->schema, config.source);
    store_resolved(config, *slot.config);
  }
}

const ComponentConfig* dataset_table(const RunConfig& config, const std::string& split) {
  const DataSection& d = config.data;
  if (split == "train") return &d.train;
  if (split == "val") return d.val ? &*d.val : d.val_from_train ? &d.train : nullptr;
  if (split == "test") return d.test ? &*d.test : d.test_from_train ? &d.train : nullptr;
  return nullptr;
}

RunComponents create_components(const RunConfig& config, const Registry& registry, DatasetSplits splits) {
  RunComponents parts;
  auto entry = [&](const ComponentConfig& c, int32_t kind) {
    ComponentEntry e = registry.find(c.component, kind, c.key_path);
    const std::string version = e.info->id + "@" + e.info->version;
    if (std::find(parts.plugin_versions.begin(), parts.plugin_versions.end(), version) == parts.plugin_versions.end())
      parts.plugin_versions.push_back(version);
    auto used = std::find_if(parts.libraries.begin(), parts.libraries.end(),
                             [&](const auto& library) { return library.first == e.library; });
    if (used == parts.libraries.end()) used = parts.libraries.insert(used, {e.library, {}});
    if (std::find(used->second.begin(), used->second.end(), version) == used->second.end()) used->second.push_back(version);
    return e;
  };
  auto dataset = [&](const std::string& split) -> std::shared_ptr<DatasetProxy> {
    const ComponentConfig* table = dataset_table(config, split);
    if (table == nullptr) return nullptr;
    return std::make_shared<DatasetProxy>(entry(*table, TP_KIND_DATASET), *table, split);
  };
  if (splits.train) parts.train_data = dataset("train");
  if (splits.val) parts.val_data = dataset("val");
  if (splits.test) parts.test_data = dataset("test");
  at::manual_seed(static_cast<uint64_t>(config.run.seed));
  parts.model = std::make_unique<ModelProxy>(entry(config.model, TP_KIND_MODEL), config.model);
  parts.loss = std::make_unique<LossProxy>(entry(config.loss, TP_KIND_LOSS), config.loss);
  for (const auto& t : config.data.batch_transforms)
    parts.batch_transforms.push_back(std::make_unique<BatchTransformProxy>(entry(t, TP_KIND_BATCH_TRANSFORM), t));
  for (const auto& m : config.metrics)
    parts.metrics.push_back(std::make_unique<MetricProxy>(entry(m, TP_KIND_METRIC), m));
  for (const auto& cb : config.callbacks)
    parts.callbacks.push_back(std::make_unique<CallbackProxy>(entry(cb, TP_KIND_CALLBACK), cb));
  return parts;
}

}  // namespace tp
