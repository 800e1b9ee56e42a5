#include "tp/framework/engine/run_components.h"

#include <ATen/Context.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tp/framework/config/closest_key.h"
#include "tp/framework/config/validate.h"
#include "tp/framework/error.h"
#include "tp/framework/util/bounded_text.h"

namespace tp {
namespace {

struct Slot {
  ComponentConfig* config;
  int32_t kind;
};

std::vector<Slot> slots_of(RunConfig& c) {
  // An empty model or loss id: a data-only config (ConfigScope::kData), which has neither.
  std::vector<Slot> slots;
  if (!c.model.component.empty()) slots.push_back({&c.model, TP_KIND_MODEL});
  if (!c.loss.component.empty()) slots.push_back({&c.loss, TP_KIND_LOSS});
  slots.push_back({&c.data.train, TP_KIND_DATASET});
  if (c.data.val) slots.push_back({&*c.data.val, TP_KIND_DATASET});
  if (c.data.test) slots.push_back({&*c.data.test, TP_KIND_DATASET});
  for (auto& t : c.data.batch_transforms) slots.push_back({&t, TP_KIND_BATCH_TRANSFORM});
  for (auto& m : c.metrics) slots.push_back({&m, TP_KIND_METRIC});
  for (auto& cb : c.callbacks) slots.push_back({&cb, TP_KIND_CALLBACK});
  return slots;
}

// "/opt/torchhost/plugins, /home/me/build": the directories the loaded plugins came from.
std::string plugin_directories(const Registry& registry) {
  std::vector<std::string> dirs;
  for (const auto& library : registry.libraries()) {
    const std::string dir = library->path().parent_path().string();
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  std::string text;
  for (const std::string& dir : dirs) text += (text.empty() ? "" : ", ") + dir;
  return text.empty() ? "no plugin was loaded" : "the loaded plugins come from " + text;
}

// One ConfigError listing every component of the run that no loaded plugin provides, so a
// forgotten --plugin-dir is found in one try rather than one component per run.
void require_loaded(const std::vector<Slot>& slots, const Registry& registry) {
  const std::vector<ComponentEntry> loaded = registry.all();
  const auto is_loaded = [&](const std::string& id) {
    return std::any_of(loaded.begin(), loaded.end(), [&](const ComponentEntry& e) { return e.info->id == id; });
  };
  std::vector<const Slot*> missing;
  for (const Slot& slot : slots)
    if (!is_loaded(slot.config->component)) missing.push_back(&slot);
  if (missing.empty()) return;
  std::string list;
  for (const Slot* slot : missing) {
    std::vector<std::string> same_kind;
    for (const ComponentEntry& entry : loaded)
      if (entry.info->kind == slot->kind) same_kind.push_back(entry.info->id);
    const std::string guess = closest_key(slot->config->component, same_kind);
    // The id is the config's text, anyone's: an ESC or newline in it would drive the terminal or
    // forge a log line (security trial F7).
    list += (list.empty() ? "" : ", ") + slot->config->key_path + ".component = \"" +
            escape_control_characters(slot->config->component, /*keep_newlines=*/false) + "\" (a " + kind_name(slot->kind) + (guess.empty() ? "" : "; did you mean '" + guess + "'?") + ")";
  }
  const bool one = missing.size() == 1;
  throw ConfigError(missing.front()->config->key_path + ".component",
                    (one ? std::string("a component of the run is not loaded: ")
                         : std::to_string(missing.size()) + " components of the run are not loaded: ") +
                        list + ". No plugin on the search path provides " + (one ? "it" : "them") + " (" +
                        plugin_directories(registry) + "). If " + (one ? "it is" : "they are") +
                        " in a plugin you built, add its directory: `--plugin-dir DIR` on the command line, or "
                        "`[plugins] dirs = [\"DIR\"]` in the config (or TORCHHOST_PLUGIN_PATH); `host plugins list "
                        "--plugin-dir DIR` shows the components a directory provides.");
}

}  // namespace

void resolve_components(RunConfig& config, const Registry& registry) {
  const std::vector<Slot> slots = slots_of(config);
  require_loaded(slots, registry);
  for (const Slot& slot : slots) {
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

namespace {

// Batch transforms (Mixup, CutMix) blend whole rows of stacked fields; on a padded or ragged
// batch they would blend padding into images or tear a ragged field from its offsets, so a run
// whose training data declares such fields (plugin ABI 1.6) cannot use them.
void refuse_transforms_of_variable_batches(const RunConfig& config, const RunComponents& parts) {
  if (parts.batch_transforms.empty() || parts.train_data == nullptr) return;
  const BatchLayout& layout = parts.train_data->batch_layout();
  if (layout.empty()) return;
  const ComponentConfig& first = config.data.batch_transforms.front();
  throw ConfigError(first.key_path,
                    "config: " + first.key_path + " uses batch transform '" + parts.batch_transforms.front()->id() +
                        "', but the training dataset '" + parts.train_data->id() +
                        "' declares variable-size fields (" + layout.describe() +
                        "). Batch transforms such as Mixup and CutMix blend whole rows of fixed-shape fields "
                        "and do not apply to padded or ragged batches: remove [[data.batch_transforms]], or "
                        "crop the training samples to one size so every field stacks.");
}

// A dataset's class names (ABI 1.12) must count the classes the loss declares for that field
// (ABI 1.9): names for another label set would put every class name of an export and of
// `host predict` on the wrong class.
void check_class_name_count(const DatasetProxy* data, const LossProxy& loss) {
  if (data == nullptr) return;
  if (const std::string problem = class_count_problem(data->class_names(), loss.description().contracts);
      !problem.empty())
    throw PluginError(data->id(), "class_names",
                      "plugin component '" + data->id() + "' lent " + problem + " ('" + loss.id() +
                          "'): the names would be put on the wrong classes. Make the dataset's classes and the "
                          "loss's (and the model's) number of classes agree.");
}

// The names of a class list for a message: the first ten, then "...".
std::string first_names(const std::vector<std::string>& names) {
  std::string listed;
  for (std::size_t i = 0; i < names.size() && i < 10; ++i) listed += (i == 0 ? "" : ", ") + names[i];
  return names.size() > 10 ? listed + ", ..." : listed;
}

// A model's or batch transform's `num_classes` (the zoo's key, torchvision's name; mixup_cutmix's)
// below the classes a dataset names: a label past the model's outputs fails the first loss call
// ("Target 2 is out of bounds") after the whole start-up, or trains a wrong model; past a
// transform's one-hot width, its first apply ("index 3 is out of bounds for dimension 1"). More
// than the named classes is left alone: detection counts a background class, and a model may be
// made for classes still to come; so is one or none (a binary head under a BCE-style loss, a
// features-only model).
void check_class_count(const ComponentConfig& model, const DatasetProxy* data, const std::string& table) {
  if (data == nullptr || data->class_names().empty()) return;
  const std::optional<int64_t> declared = model.options["num_classes"].value<int64_t>();
  const std::vector<std::string>& names = data->class_names().names;
  if (!declared || *declared < 2 || *declared >= static_cast<int64_t>(names.size())) return;
  const std::string listed = first_names(names);
  throw ConfigError(model.key_path + ".num_classes",
                    "config: " + model.key_path + ".num_classes = " + std::to_string(*declared) + ", but [" + table +
                        "] ('" + data->id() + "') names " + std::to_string(names.size()) + " classes (" + listed +
                        "), so labels from " + std::to_string(*declared) + " up are out of its range. Set " +
                        model.key_path + ".num_classes = " + std::to_string(names.size()) + ".");
}

// A batch transform's `num_classes` (mixup_cutmix's one-hot width) other than the model's: the
// mixed targets are that wide and the loss pairs them with the model's logits, so the first
// training step failed in the loss, naming [loss] (migration trial F4: 5 against 3). The count
// below the dataset's classes is check_class_count's; this one catches a width above it too.
void check_transform_width(const ComponentConfig& transform, const ComponentConfig& model) {
  const std::optional<int64_t> width = transform.options["num_classes"].value<int64_t>();
  const std::optional<int64_t> outputs = model.options["num_classes"].value<int64_t>();
  if (!width || !outputs || *width == *outputs) return;
  throw ConfigError(transform.key_path + ".num_classes",
                    "config: " + transform.key_path + ".num_classes = " + std::to_string(*width) + ", but " +
                        model.key_path + ".num_classes = " + std::to_string(*outputs) + ": the transform's targets " +
                        "would be " + std::to_string(*width) + " classes wide and the loss compares them with the "
                        "model's " + std::to_string(*outputs) + " outputs. Set " + transform.key_path +
                        ".num_classes = " + std::to_string(*outputs) + " (the model's count).");
}

}  // namespace

std::optional<std::string> surplus_outputs_note(const RunConfig& config, const RunComponents& parts) {
  if (!parts.train_data || parts.train_data->class_names().empty()) return std::nullopt;
  const std::optional<int64_t> declared = config.model.options["num_classes"].value<int64_t>();
  const auto named = static_cast<int64_t>(parts.train_data->class_names().names.size());
  if (!declared || *declared <= named + 1) return std::nullopt;
  return config.model.key_path + ".num_classes = " + std::to_string(*declared) + ", but [" +
         dataset_table(config, "train")->key_path + "] ('" + parts.train_data->id() + "') names " +
         std::to_string(named) + " classes (" + first_names(parts.train_data->class_names().names) + "): " +
         std::to_string(*declared - named) + " outputs never get a label, and host predict, host export and the "
         "inference library give class names only when the counts agree. Set " + config.model.key_path +
         ".num_classes = " + std::to_string(named) + " unless the extra outputs are meant.";
}

void check_same_classes(const RunConfig& config, const ClassNames& trained, const ComponentConfig* trained_table,
                        const DatasetProxy* held_out, const std::string& split) {
  if (held_out == nullptr || trained.empty() || held_out->class_names().empty()) return;
  const std::vector<std::string>& want = trained.names;
  const std::vector<std::string>& have = held_out->class_names().names;
  if (want == have) return;
  std::size_t first = 0;
  while (first < want.size() && first < have.size() && want[first] == have[first]) ++first;
  const std::string at = "label " + std::to_string(first) + " is '" + (first < want.size() ? want[first] : "(none)") +
                         "' in training and '" + (first < have.size() ? have[first] : "(none)") + "' here";
  const ComponentConfig& table = *dataset_table(config, split);
  const std::string counts = std::to_string(have.size()) + " classes (" + first_names(have) + ")";
  const std::string against = std::to_string(want.size()) + " (" + first_names(want) + ")";
  const std::string which =
      trained_table == &table ? "[" + table.key_path + "] ('" + held_out->id() + "') names " + counts + " for its " +
                                    split + " split and " + against + " for training"
      : trained_table != nullptr
          ? "the " + split + " split ([" + table.key_path + "], '" + held_out->id() + "') names " + counts +
                " and the training split ([" + trained_table->key_path + "]) " + against
          : "the " + split + " split ([" + table.key_path + "], '" + held_out->id() + "') names " + counts +
                " and the checkpoint's training data named " + against;
  throw ConfigError(table.key_path, "config: " + which + ": " + at + ", so its labels would be scored as other "
                                    "classes. Give both splits the same classes in the same order (coco_detection "
                                    "with contiguous_labels: the same `categories` in both annotation files; "
                                    "image_folder: the same class folders, or the same label names in both csv listings).");
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
  if (parts.train_data)
    for (const auto& [held_out, split] : {std::pair{parts.val_data.get(), "val"}, std::pair{parts.test_data.get(), "test"}})
      check_same_classes(config, parts.train_data->class_names(), dataset_table(config, "train"), held_out, split);
  at::manual_seed(static_cast<uint64_t>(config.run.seed));
  parts.model = std::make_unique<ModelProxy>(entry(config.model, TP_KIND_MODEL), config.model);
  parts.loss = std::make_unique<LossProxy>(entry(config.loss, TP_KIND_LOSS), config.loss);
  for (const DatasetProxy* data : {parts.train_data.get(), parts.val_data.get(), parts.test_data.get()})
    check_class_name_count(data, *parts.loss);
  const auto check_counts = [&](const ComponentConfig& table) {
    if (parts.train_data) check_class_count(table, parts.train_data.get(), dataset_table(config, "train")->key_path);
  };
  check_counts(config.model);
  for (const auto& t : config.data.batch_transforms) {
    check_counts(t);
    check_transform_width(t, config.model);
    parts.batch_transforms.push_back(std::make_unique<BatchTransformProxy>(entry(t, TP_KIND_BATCH_TRANSFORM), t));
  }
  refuse_transforms_of_variable_batches(config, parts);
  for (const auto& m : config.metrics)
    parts.metrics.push_back(std::make_unique<MetricProxy>(entry(m, TP_KIND_METRIC), m));
  for (const auto& cb : config.callbacks)
    parts.callbacks.push_back(std::make_unique<CallbackProxy>(entry(cb, TP_KIND_CALLBACK), cb));
  return parts;
}

}  // namespace tp
