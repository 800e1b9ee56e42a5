// Validating a component table against the key schema its plugin declares.
//
// load_run_config() keeps each component table's keys unchecked, because a plugin's keys are known
// only once the plugin is loaded. The framework then calls validate_component() with the schema
// from plugin_schema(); afterwards every declared key has a value of its type, so the plugin's
// getters (ConfigView) fail only for undeclared keys.
#pragma once

#include <string_view>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/config/schema.h"

namespace tp {

/// Checks `component.options` against `schema` and fills in the default of every key the user left
/// out; integers given for Float keys become floats. Errors name the table and the component
/// ("[model] (org.torchhost.small_cnn): unknown key 'widht'; did you mean 'width'?") and, where
/// the node still has its source position, `source_file:line:column` (positions survive moves of
/// the RunConfig but not copies). Throws tp::ConfigError with the key path ("model.widht") for an
/// unknown key, a wrong type, a string outside the key's choices, or a missing required key.
/// On error `component.options` may be partly filled.
/// Example:
///   validate_component(cfg.model, plugin_schema(desc->keys, desc->key_count, desc->id),
///                      cfg.source);
void validate_component(ComponentConfig& component, const std::vector<KeySpec>& schema,
                        std::string_view source_file);

/// Replaces the table at `component.key_path` ("model", "data.train", "metrics[1]") in
/// `cfg.resolved` with `component.options` plus `component = "<id>"`, so that config.toml records
/// the plugin defaults too. Throws tp::Error when the key path is not a component slot or the
/// index is past the end of the array.
void store_resolved(RunConfig& cfg, const ComponentConfig& component);

}  // namespace tp
