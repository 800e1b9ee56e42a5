// Secrets never reach a file, a log or a server's metadata (docs/experiment_tracking.md, "What is
// recorded where, and what never is"; docs/hardening.md, section 15). Two rules, each in one place:
//   - a URI's user-info ("http://user:password@host", "https://token@host") is replaced by "***"
//     in every text the host writes or sends: the resolved config (config.toml, train.log,
//     checkpoints, TensorBoard's config text, MLflow's params), the command line and environment
//     in runtime.toml, sweep.toml's overrides, error messages. The credentials themselves are read
//     from the URI in memory only (tracking/mlflow_http.cpp, connection_from).
//   - of the environment variables provenance lists, only a known set is recorded with its value;
//     any other (a TP_* variable that is no config key's mirror, TORCH_TOKEN) by its name alone.
// Torch-free (tp::config): the config loader, provenance, the sweep record and MLflow share them.
#pragma once

#include <string>
#include <string_view>

namespace tp {

/// What replaces a URI's user-info: "http://***@host:5000". A URI whose user-info is this marker
/// carries no credentials (a redacted URI read back from config.toml).
inline constexpr std::string_view kRedactedUserInfo = "***";

/// `text` with the user-info of every URI in it replaced by kRedactedUserInfo: for each "://",
/// the part up to the last '@' before the next '/', '?', '#', whitespace or control character.
/// Text without "...://...@" is returned unchanged; safe on any text (a command line, a log line).
/// Example: redact_uri_credentials("--set uri=\"http://me:pw@h:5000/x\"") == "--set uri=\"http://***@h:5000/x\""
std::string redact_uri_credentials(std::string_view text);

/// What runtime.toml records instead of the value of an environment variable it lists by name only.
inline constexpr std::string_view kUnrecordedValue = "(not recorded)";

/// Whether provenance records environment variable `name` with its value (passed through
/// redact_uri_credentials) rather than by name alone: the environment mirrors of the config's host
/// keys (TP_TRAIN_BATCH_SIZE; docs/config_keys.md), OMP_NUM_THREADS, MKL_NUM_THREADS,
/// CUDA_VISIBLE_DEVICES, a short list of LibTorch's own TORCH_* switches, and the variables of the
/// NCCL_, TORCH_NCCL_, GLOO_ and MALLOC_ families (the libraries' settings) unless the name holds
/// TOKEN, SECRET, PASSW, CREDENTIAL or AUTH. Any other name is a user's, whose value may be a secret.
bool environment_value_recordable(std::string_view name);

}  // namespace tp
