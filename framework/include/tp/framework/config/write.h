// Writing a resolved configuration back out as TOML (config.toml in the run directory, the config
// text stored in checkpoints).
#pragma once

#include <string>

#include <toml++/toml.h>

namespace tp {

/// `table` as TOML text (TOML++ toml_formatter), ending with a newline. Loading the text again
/// yields the same RunConfig: floats keep a decimal point or exponent, so their type survives;
/// only a URI's user-info is written as "***" (redact_uri_credentials, secrets.h), so a password
/// in logging.mlflow.tracking_uri never reaches config.toml, train.log or a checkpoint.
/// Example:
///   std::ofstream(run_dir / "config.toml") << to_toml_text(cfg.resolved);
std::string to_toml_text(const toml::table& config);

}  // namespace tp
