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

#include <optional>
#include <string>
#include <string_view>

namespace tp {

/// What replaces a URI's user-info: "http://***@host:5000". A URI whose user-info is this marker
/// carries no credentials (a redacted URI read back from config.toml).
inline constexpr std::string_view kRedactedUserInfo = "***";

/// `text` with the user-info of every URI in it replaced by kRedactedUserInfo. For each "://", the
/// user-info ends at the last '@' before the next '/', '?', '#', whitespace or control character
/// (RFC 3986) where what follows that '@' reads as host[:port]; where it does not (an unencoded
/// '#', '?' or '/' in the password cut the authority short: "http://alice:pa#ss@h"), at the last
/// '@' before the next whitespace or control character, the only reading left. An '@' in the path
/// of a URI whose authority reads as host[:port] ("http://h/x@y") is no user-info; such a URI
/// whose password may hold '/' is refused at load (unreadable_user_info). Text without
/// "...://...@" is returned unchanged; safe on any text (a command line, a log line).
/// Example: redact_uri_credentials("--set uri=\"http://me:pw@h:5000/x\"") == "--set uri=\"http://***@h:5000/x\""
std::string redact_uri_credentials(std::string_view text);

/// The user-info of `uri` as redact_uri_credentials reads it ("u:p" of "http://u:p@h:5000/x"), a
/// view into `uri`; nullopt when it has none or no "://". The credential splitter
/// (tracking/mlflow_http.cpp) reads it so, so what it sends is exactly what the writers hide.
std::optional<std::string_view> uri_user_info(std::string_view uri);

/// "" when the user-info of tracking URI `uri` reads one way only (or it has no '@'); otherwise
/// the paragraph that refuses it, naming `where` ("logging.mlflow.tracking_uri", "--set
/// logging.mlflow.tracking_uri"), showing the URI with everything before its last '@' as
/// kRedactedUserInfo, and telling to percent-encode '#' (%23), '?' (%3F), '/' (%2F) and '@' (%40).
/// Refused: an '@' after the first '/', '?' or '#' (the password or the path could hold it), more
/// than one '@', a space or control character, and user-info without "http(s)://" in front
/// ("alice:pw@host:5000"). The config loader calls it before anything is written (security
/// trial F4: such a password reached config.toml, checkpoints and train.log in clear).
std::string unreadable_user_info(std::string_view where, std::string_view uri);

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
