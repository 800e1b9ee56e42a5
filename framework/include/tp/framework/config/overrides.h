// Environment mirrors and `--set` overrides, merged into a parsed run table before validation.
//
// Precedence: defaults < file < environment < --set. A value is parsed with TOML value rules
// ("64", "3e-4", "[0.9, 0.95]", "\"cpu\""); text that is not a valid TOML value is taken as a
// string, so `--set run.device=cuda:1` works without shell-quoted quotes. Types are not checked
// here: validate_host_table() and validate_component() check them, and name the override as the
// origin of a bad value ("--set train.batch_size=big: train.batch_size: expected an integer ...").
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace tp {

/// One `--set` argument, split at its first '='.
struct Override {
  std::string key_path;   ///< "optim.lr", "model.width", "metrics[0].top_k"
  std::string value_text; ///< "3e-4"
};

/// Splits "key.path=value". Throws tp::ConfigError when there is no '=' or the key is empty.
Override parse_override(std::string_view text);

/// For every host key `a.b_c` whose mirror TP_A_B_C is in `env`, sets root[a][b_c] to the parsed
/// value (string fallback). Component keys have no environment mirrors. Throws tp::ConfigError
/// when the section exists but is not a table.
void apply_environment(toml::table& root, const std::map<std::string, std::string>& env);

/// The variables of the environment torchhost's own tools read (scripts/test's TP_UNITY, the
/// sanitizer, fuzz and venv scripts, the GPU report's TP_GPU_COMMIT, the oracle tests' fixture
/// directories, the kill -9 test's seed): TP_* names that are no config key's mirror, yet not a
/// mistake, so unknown_environment_variables() passes over them.
const std::vector<std::string>& tool_environment_variables();

/// One warning per variable of `env` that starts with TP_ and is neither a host key's mirror nor
/// one of tool_environment_variables(): apply_environment() ignores it, so a mistyped
/// TP_TRAIN_BATCHSIZE would go unnoticed. Each names the variable, never its value (it may hold a
/// secret), and the closest mirror when one is a plausible typo (closest_key, as an unknown key in
/// the file gets). In the order of the names.
std::vector<std::string> unknown_environment_variables(const std::map<std::string, std::string>& env);

/// Applies `--set` arguments in order (a later one wins). A key is a host key
/// ("train.batch_size") or a key of a component table ("model.width", "data.train.size",
/// "metrics[0].top_k", "loss.component"); a component table that does not exist yet is created,
/// and "metrics[N]" with N equal to the array's length appends one.
/// Throws tp::ConfigError naming the argument for a malformed argument, an unknown key (with a
/// "did you mean" suggestion), an index past the end, or a nested component key.
/// Example:
///   apply_overrides(root, {"optim.lr=3e-4", "run.device=cpu", "optim.betas=[0.9,0.95]"});
void apply_overrides(toml::table& root, const std::vector<std::string>& overrides);

}  // namespace tp
