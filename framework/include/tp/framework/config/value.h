// Typed TOML values: parsing one value literal, checking a node against a ValueType, and saying
// where a node came from. Shared by host-key loading, plugin-table validation and the schema.
#pragma once

#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "tp/framework/config/schema.h"

namespace tp {

/// Origin prefixes of values that did not come from the config file. A node parsed from an
/// override carries its origin ("--set train.batch_size=64") as its source path, so error
/// messages name the override instead of a line in the file.
inline constexpr std::string_view kSetOriginPrefix = "--set ";               ///< + the argument
inline constexpr std::string_view kEnvOriginPrefix = "environment variable "; ///< + NAME=value

/// Parses `literal` as exactly one TOML value ("64", "3e-4", "\"cpu\"", "[0.9, 0.95]", "true")
/// and stores it as `dst[key]`, replacing any value there. The new node's source path is
/// `origin`. Returns false and leaves `dst` unchanged when `literal` is not one valid TOML value;
/// `error` (when not null) then receives TOML++'s description.
bool parse_value_into(toml::table& dst, std::string_view key, std::string_view literal,
                      std::string_view origin, std::string* error = nullptr);

/// Sets `dst[key]` from `text` as `--set` reads a value: one TOML value when it parses as one
/// ("64", "[0.9, 0.95]", "\"cpu\""), else the text itself as a string (`cuda:1`, `a b`). Either
/// way the node's source path is `origin`, which validation messages then show.
void set_value_or_string(toml::table& dst, std::string_view key, std::string_view text, std::string_view origin);

/// The table at the dotted path `tables` below `root` ("logging.mlflow"; "" = `root` itself), each
/// table on the way created where missing. nullptr when a part of the path is a value other than a
/// table: `blocked` (when not null) then points at that value, for the caller's message.
toml::table* ensure_tables(toml::table& root, std::string_view tables, const toml::node** blocked = nullptr);

/// The value of string `node`, which names a file or directory (TP_CFG_PATH, train.init_weights),
/// as the run should open it. A relative path the user wrote in a config file is taken relative to
/// that file's directory and made absolute, so the resolved config written into the run directory
/// still names the same file from anywhere. Values from `--set` or the environment (their origin
/// says so) are relative to the working directory, like shell arguments, and made absolute too;
/// defaults and URIs (`scheme://...`) stay as written.
/// `source_file` is the file of a node that carries no path of its own.
std::string resolve_config_path(const toml::node& node, std::string_view source_file);

/// True when `node` has `type`. An integer matches Float, integers inside an array match
/// FloatArray, and an empty array matches every array type. Nothing else converts.
bool matches_type(const toml::node& node, ValueType type);

/// Rewrites `parent[key]` to the canonical form of `type`: integers become floats for Float and
/// FloatArray. Call only after matches_type() succeeded. Drops the node's source position.
void coerce_to_type(toml::table& parent, std::string_view key, ValueType type);

/// What `node` is, for messages: "a string (\"64\")", "an integer (3)", "a table",
/// "an array containing a string".
std::string describe_node(const toml::node& node);

/// Where `node` came from: the override that set it ("--set optim.lr=abc"), else
/// "<file>:<line>:<column>" from its source position, else `fallback_file` (or "config" when
/// that is empty).
std::string node_origin(const toml::node& node, std::string_view fallback_file);

/// True when `value` is allowed by `spec.choices` (always true when there are none).
bool choice_allows(const KeySpec& spec, std::string_view value);

/// The choices as "auto, cpu, cuda or cuda:N".
std::string choices_phrase(const KeySpec& spec);

}  // namespace tp
