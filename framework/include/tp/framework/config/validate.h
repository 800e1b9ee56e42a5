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

/// Makes the value of every path key (KeySpec::is_path) of `schema` that `component` sets as a
/// string absolute, as validate_component() would: a value written in a file beside that file
/// (`source_file` when the node no longer knows its file), a --set or environment value from the
/// working directory. Call it on the loaded RunConfig's own table, before copying it: a copy's
/// nodes lose where they were written (toml++ copies no source positions), and validating the copy
/// would take a --set value as the file's. Values of other keys and types are left alone.
/// Example (`host plugins check --config`):
///   resolve_path_keys(run.data.train, library_schema, run.source);
///   options.configs.emplace(run.data.train.component, run.data.train);
void resolve_path_keys(ComponentConfig& component, const std::vector<KeySpec>& schema, std::string_view source_file);

/// Replaces the table at `component.key_path` ("model", "data.train", "metrics[1]") in
/// `cfg.resolved` with `component.options` plus `component = "<id>"`, so that config.toml records
/// the plugin defaults too. Throws tp::Error when the key path is not a component slot or the
/// index is past the end of the array.
void store_resolved(RunConfig& cfg, const ComponentConfig& component);

}  // namespace tp
