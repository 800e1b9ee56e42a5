// A resolved run table as a flat list of (key path, value), for comparing runs key by key
// (`host compare`, and `host sweep` checking that a finished cell was trained with the
// configuration it would use now).
#pragma once

#include <map>
#include <set>
#include <string>

#include <toml++/toml.h>

namespace tp {

/// One leaf value of a table.
struct FlatValue {
  /// The value as a TOML literal: `"bf16"`, `64`, `0.003`, `1.0`, `[0.9, 0.95]`. Strings keep
  /// their quotes and floats their point, so 64, 64.0 and "64" are three different values.
  std::string literal;
  /// The value for people: as `literal`, but a string without its quotes (`bf16`).
  std::string display;
  /// The TOML type of the value (string, integer, floating_point, boolean, array, ...).
  toml::node_type type = toml::node_type::none;
  bool operator==(const FlatValue& other) const { return literal == other.literal; }
};

/// Key path -> value, sorted by key path.
using FlatConfig = std::map<std::string, FlatValue>;

/// Every leaf of `table` under its dotted key path: "train.batch_size", "data.train.size", and
/// "metrics[0].component" for arrays of tables; arrays of values are one leaf ("optim.betas").
/// Floats are written in their shortest round-trip form; a URI in a string loses its user-info
/// (redact_uri_credentials, secrets.h), as in config.toml.
/// Example:
///   FlatConfig flat = flatten_config(toml::parse_file("runs/a/config.toml"));
///   flat.at("amp.precision").display;  // "bf16"
FlatConfig flatten_config(const toml::table& table);

/// `flat` with every host key it lacks added at its default (host_key_schema()): the config.toml
/// of a run trained before a key existed then compares equal to today's where the key keeps its
/// default (a sweep cell is not "trained with another configuration" because the host learned a
/// new setting). Component keys are left as they are.
FlatConfig with_host_defaults(FlatConfig flat);

/// The keys that name where a run put its files or is tracked rather than how it trained
/// (run.output_dir, plugins.dirs, logging.mlflow.parent_run_id, which host sweep sets per cell);
/// comparisons leave them out.
const std::set<std::string>& run_location_keys();

/// The keys (outside run_location_keys()) whose values differ between `a` and `b`, or that only
/// one of them has, in key order.
std::set<std::string> differing_keys(const FlatConfig& a, const FlatConfig& b);

}  // namespace tp
