// The key schema: every configuration key the host understands, declared exactly once.
//
// A KeySpec names a key by its dotted path, its value type, its default (a TOML value literal)
// and a one-line help text. host_key_schema() lists every host key, taken from the host key table
// (config/host_keys.h, where each key is declared once beside the RunConfig member it fills);
// configs/reference.toml shows the same keys with the same defaults, and a unit test keeps the two
// in step. Component tables
// ([model], [loss], [data.train], [[metrics]], ...) are not host keys: each names its component in
// the reserved key `component`, and the rest of the table is checked against the schema the plugin
// declares, converted here by plugin_schema().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tp/config.h"
#include "tp/framework/config/value_kinds.h"

namespace tp {

/// The type of a configuration value. Float keys also accept an integer literal.
enum class ValueType { Bool, Int, Float, String, IntArray, FloatArray, StringArray };

/// One declared key.
struct KeySpec {
  std::string path;            ///< "train.batch_size" for host keys, "width" for plugin keys
  ValueType type;              ///< the only type accepted (an integer is also a valid Float)
  std::string default_literal; ///< TOML literal ("32", "\"auto\"", "[0.9, 0.999]"); "" = required
  std::string help;            ///< one line
  /// Allowed string values; empty = any. A choice ending in ":N" ("cuda:N") stands for that
  /// prefix followed by a non-negative integer ("cuda:0", "cuda:3").
  std::vector<std::string> choices;
  /// A String naming a file or directory (TP_CFG_PATH): validate_component() resolves a relative
  /// value written in a config file against that file's directory.
  bool is_path = false;
  /// A String of a value kind (a duration, a device, a precision; value_kinds.h), checked when the
  /// config is loaded. Host keys only; nullptr = any string (within `choices`).
  const ValueKind* kind = nullptr;
};

/// A place in the run file that holds component tables.
struct ComponentSlot {
  std::string_view path; ///< "model", "loss", "data.train", "data.val", "data.test", "data.batch_transforms", "metrics", "callbacks"
  bool required;         ///< the run cannot start without it
  bool array;            ///< an array of tables ([[metrics]]) rather than one table
  std::string_view example_id; ///< a built-in component id that fits, for messages
};

/// The reserved key of every component table; its string value is the component id.
inline constexpr std::string_view kComponentKey = "component";

/// The host keys allowed inside the [model] component table, booleans the host applies through
/// the model's table: `activation_checkpointing = true` recomputes the blocks the model declares,
/// `freeze_bn_stats = true` keeps its BatchNorm layers in eval mode while it trains (a model
/// plugin cannot declare keys of these names).
inline constexpr std::string_view kActivationCheckpointingKey = "activation_checkpointing";
inline constexpr std::string_view kFreezeBnStatsKey = "freeze_bn_stats";

/// The array of tables [[optim.param_groups]]: `pattern` (required), `lr`, `weight_decay`.
inline constexpr std::string_view kParamGroupsPath = "optim.param_groups";

/// Every host key, in the order of configs/reference.toml: the `spec` of each host_keys() row.
/// Static storage; never empty.
const std::vector<KeySpec>& host_key_schema();

/// The host key with this dotted path, or nullptr.
const KeySpec* find_host_key(std::string_view path);

/// The component slots: model, loss (required), data.train (required), data.val, metrics and
/// callbacks (arrays of tables, optional). Static storage.
const std::vector<ComponentSlot>& component_slots();

/// The component slot at exactly this dotted path ("data.train"), or nullptr.
const ComponentSlot* find_component_slot(std::string_view path);

/// The environment variable mirroring a host key: "train.batch_size" -> "TP_TRAIN_BATCH_SIZE".
std::string env_mirror_name(std::string_view key_path);

/// "a boolean", "an integer", "a float", "a string", "an array of integers", ... for messages.
std::string_view value_type_phrase(ValueType type);

/// The ValueType of a TP_CFG_* constant; false when `tp_cfg_type` is not one.
bool value_type_from_abi(int32_t tp_cfg_type, ValueType* out_type);

/// Converts a plugin's declared key schema (plugin_api/include/tp/config.h) to KeySpecs.
/// `keys` may be NULL when `count` is 0. The array's stride is keys[0].struct_size, so a plugin
/// built against a newer tp_config_key_t (with more fields) is read correctly.
/// Throws tp::PluginLoadError naming `component_id` and the key when the struct is too small, a
/// name is NULL, empty, not a bare TOML key, duplicated or the reserved "component", the type is
/// not a TP_CFG_* value, or the default literal does not parse as that type (rule PLG-6).
/// Example:
///   std::vector<KeySpec> schema = plugin_schema(desc->keys, desc->key_count, desc->id);
std::vector<KeySpec> plugin_schema(const tp_config_key_t* keys, uint32_t count,
                                   std::string_view component_id);

}  // namespace tp
