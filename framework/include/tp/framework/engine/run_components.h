// The plugin components of one run, created from the config in dependency order
// (docs/architecture.md, run step 5) and destroyed in reverse.
#pragma once

#include <functional>
#include <memory>
#include <optional>
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

class DistContext;

struct RunComponents {
  // Declaration order is destruction order reversed: datasets go last, after every batch that
  // may still hold their DLPack buffers.
  std::shared_ptr<DatasetProxy> train_data;
  std::shared_ptr<DatasetProxy> val_data; ///< null when the run has no validation split
  std::shared_ptr<DatasetProxy> test_data; ///< created only when asked for (host eval/predict --split test)
  std::unique_ptr<ModelProxy> model;
  std::unique_ptr<LossProxy> loss;
  std::vector<std::unique_ptr<BatchTransformProxy>> batch_transforms; ///< training batches only, in order
  std::vector<std::unique_ptr<MetricProxy>> metrics;
  std::vector<std::unique_ptr<CallbackProxy>> callbacks;
  std::vector<std::string> plugin_versions; ///< "id@version" of each component used
  /// Each plugin library the run used, once, with the "id@version" of its components used
  /// (in first-use order): provenance (engine/setup/provenance.h) hashes these files.
  std::vector<std::pair<std::shared_ptr<PluginLibrary>, std::vector<std::string>>> libraries;
};

/// Looks up every component table of `config` in `registry`, validates each table against the
/// component's schema (filling defaults, also into config.resolved), so that config problems are
/// all reported before anything is created. Throws ConfigError.
void resolve_components(RunConfig& config, const Registry& registry);

/// Which dataset splits create_components builds. Training reads train and val; `host eval
/// --split test` adds test; `host predict` reads only the split it predicts.
struct DatasetSplits {
  bool train = true;
  bool val = true;
  bool test = false;
};

/// The table a split's dataset is created from: [data.<split>], or [data.train] when the split
/// has no table and data.<split>_from_train is set (train: always [data.train]); nothing when the
/// run has no such split. `split` is "train", "val" or "test".
const ComponentConfig* dataset_table(const RunConfig& config, const std::string& split);

/// A label means one class in every split: throws ConfigError on `split`'s table when its dataset
/// `held_out` names other classes (ABI 1.12) than `trained`, the training data's (its dataset's,
/// from `trained_table`, or a checkpoint's, `trained_table` null), naming both lists and the first
/// label apart. Nothing when either names none or `held_out` is null. coco_detection's
/// contiguous_labels rank each split's own file's categories, image_folder's csv listings each
/// file's label names: one listing fewer put every later label on another class, silently.
void check_same_classes(const RunConfig& config, const ClassNames& trained, const ComponentConfig* trained_table,
                        const DatasetProxy* held_out, const std::string& split);

/// A warning when the model's `num_classes` is more than one above the classes the training data
/// names (a background class is one): a value left from another recipe (1000 from ImageNet's on
/// three folders) trains outputs no label reaches, and predictions and exports carry class names
/// only when the counts agree. Nothing otherwise, or when either says nothing.
std::optional<std::string> surplus_outputs_note(const RunConfig& config, const RunComponents& parts);

/// Creates the components of a resolved config, with the dataset splits `splits` asks for (a split
/// the config does not have stays null). Refuses a val or test split whose classes differ from
/// training's (check_same_classes). The global generator is seeded with `run.seed` right
/// before the model is created, so initialisation is reproducible.
RunComponents create_components(const RunConfig& config, const Registry& registry, DatasetSplits splits = {});

/// [all ranks] Runs the prepare entry (ABI 1.5, PLG-17) of the datasets of `splits` on local rank
/// 0 of each node (`local_rank`), once per split, before any rank creates a dataset; the other
/// ranks wait for it up to dist.prepare_timeout_s (not dist.timeout_s), telling `waiting` so after
/// 2 s and every 30 s after. A failure ends every rank with its message (the failing rank's
/// PluginError; the others a tp::Error naming the rank and carrying it). Returns one log line per
/// prepared split (empty when no dataset has a prepare entry).
std::vector<std::string> prepare_datasets(const RunConfig& config, const Registry& registry, DatasetSplits splits,
                                          int local_rank, DistContext* dist,
                                          const std::function<void(const std::string&)>& waiting = nullptr);

}  // namespace tp
