// The plugin components of one run, created from the config in dependency order
// (docs/architecture.md, run step 5) and destroyed in reverse.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/batch_transform_proxy.h"
#include "tp/framework/plugin/callback_proxy.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/loss_proxy.h"
#include "tp/framework/plugin/metric_proxy.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/registry.h"

namespace tp {

struct RunComponents {
  // Declaration order is destruction order reversed: datasets go last, after every batch that
  // may still hold their DLPack buffers.
  std::shared_ptr<DatasetProxy> train_data;
  std::shared_ptr<DatasetProxy> val_data; ///< null when the run has no validation split
  std::unique_ptr<ModelProxy> model;
  std::unique_ptr<LossProxy> loss;
  std::vector<std::unique_ptr<BatchTransformProxy>> batch_transforms; ///< training batches only, in order
  std::vector<std::unique_ptr<MetricProxy>> metrics;
  std::vector<std::unique_ptr<CallbackProxy>> callbacks;
  std::vector<std::string> plugin_versions; ///< "id@version" of each component used
  /// Each plugin library the run used, once, with the "id@version" of its components used
  /// (in first-use order): provenance (engine/provenance.h) hashes these files.
  std::vector<std::pair<std::shared_ptr<PluginLibrary>, std::vector<std::string>>> libraries;
};

/// Looks up every component table of `config` in `registry`, validates each table against the
/// component's schema (filling defaults, also into config.resolved), so that config problems are
/// all reported before anything is created. Throws ConfigError.
void resolve_components(RunConfig& config, const Registry& registry);

/// Creates the components of a resolved config. The global generator is seeded with
/// `run.seed` right before the model is created, so initialisation is reproducible.
RunComponents create_components(const RunConfig& config, const Registry& registry, bool with_datasets = true);

}  // namespace tp
