// Writing a resolved configuration back out as TOML (config.toml in the run directory, the config
// text stored in checkpoints).
#pragma once

#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace tp {

/// `table` as TOML text (TOML++ toml_formatter), ending with a newline. Loading the text again
/// yields the same RunConfig: floats keep a decimal point or exponent, so their type survives;
/// only a URI's user-info is written as "***" (redact_uri_credentials, secrets.h), so a password
/// in logging.mlflow.tracking_uri never reaches config.toml, train.log or a checkpoint.
/// Example:
///   std::ofstream(run_dir / "config.toml") << to_toml_text(cfg.resolved);
std::string to_toml_text(const toml::table& config);

/// `text` as a TOML basic string: in double quotes, with '"', '\' and control characters escaped,
/// as TOML++ writes them. For a value printed for users to paste into a config (host shards write's
/// `shards = "..."`): printed raw, a '"' or '\' in it gave a line that does not parse, or that
/// adds keys. URIs are not redacted here (the caller prints its own values).
/// Example:
///   toml_basic_string("sh\"ar ds\\x");  // "\"sh\\\"ar ds\\\\x\""
std::string toml_basic_string(std::string_view text);

}  // namespace tp
