// Loading a run: TOML file -> environment mirrors -> --set overrides -> validated, typed RunConfig.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/config/run_config.h"

namespace tp {

/// Loads `file` and returns the validated run configuration. Precedence: defaults < file <
/// environment mirrors (TP_TRAIN_BATCH_SIZE for train.batch_size; see overrides.h) < `overrides`
/// ("optim.lr=3e-4", "model.width=64", "metrics[0].top_k=5"; a later one wins).
/// Host keys are checked completely (unknown key with "did you mean", type, choices, limits) and
/// defaulted; component tables only need `component = "<id>"`, their other keys are kept in
/// ComponentConfig::options for validate_component(). `resolved` holds the complete table,
/// `source` the path.
/// Throws tp::ConfigError (key path + one-paragraph message with file:line:column) for a missing
/// or unreadable file, a TOML syntax error, or any invalid value.
/// Example:
///   RunConfig cfg = load_run_config("configs/examples/shapes.toml", {"optim.lr=3e-4"},
///                                   process_environment());
/// `scope` kData accepts a config without [model] and [loss] (ConfigScope).
RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides,
                          const std::map<std::string, std::string>& env,
                          ConfigScope scope = ConfigScope::kRun);

/// As load_run_config(), from TOML text; `source_name` names it in messages and `source` is "".
RunConfig load_run_config_from_string(std::string_view toml_text, std::string_view source_name,
                                      const std::vector<std::string>& overrides,
                                      const std::map<std::string, std::string>& env,
                                      ConfigScope scope = ConfigScope::kRun);

/// The process environment (`environ`) as name -> value.
std::map<std::string, std::string> process_environment();

}  // namespace tp
