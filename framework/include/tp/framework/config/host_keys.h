// The host key table: every host configuration key, declared once, bound to the RunConfig member
// it fills.
//
// One row (framework/src/config/host_keys.cpp) names the key and its member together
// (TP_HOST_KEY(train, batch_size, ...) is the key "train.batch_size" and the member
// RunConfig::train.batch_size, so a key cannot fill another key's member), and gives its default,
// help, choices, value kind and numeric limit; the value type follows from the member's C++ type. Everything
// else derives from the table: host_key_schema() (validation, defaults, --set and environment
// typing, "did you mean" suggestions), the limit checks of validate_host_table(), and the typed
// RunConfig that load_run_config() returns. docs/config_keys.md is the recipe for adding a key.
#pragma once

#include <optional>
#include <vector>

#include <toml++/toml.h>

#include "tp/framework/config/run_config.h"
#include "tp/framework/config/schema.h"

namespace tp {

/// A numeric limit of a host key, checked by validate_host_table() with the message
/// "<key>: must be >= 1, got ..." (or "> 0", "> 0 and < 1").
struct KeyLimit {
  double low;                  ///< the lower bound
  bool low_inclusive;          ///< true: value >= low; false: value > low
  std::optional<double> below; ///< an exclusive upper bound, when there is one
};

/// One host key and the member of RunConfig it fills.
struct HostKey {
  KeySpec spec;                  ///< path, type (from the member's type), default, help, choices
  std::optional<KeyLimit> limit; ///< numeric limit; absent = any value of the type
  /// Writes the key's value into its member. `value` has the key's type (validated and completed
  /// by validate_host_table() and complete_host_table()). nullptr for a key that has no member
  /// because every value but its default is refused (dist.sync_batchnorm).
  void (*read)(const toml::node& value, RunConfig& cfg);
  /// The address of the member inside `cfg` (nullptr when `read` is), so tests can check that
  /// every key has a member of its own and every member of a section has a key.
  void* (*member)(RunConfig& cfg);
  /// A key of a value kind whose member keeps the text as written may also fill a parsed member
  /// beside it (train.max_time -> train.max_time_seconds); both nullptr otherwise.
  void (*read_parsed)(const toml::node& value, RunConfig& cfg) = nullptr;
  void* (*parsed_member)(RunConfig& cfg) = nullptr;
};

/// Every host key, in the order of configs/reference.toml. Static storage; never empty.
const std::vector<HostKey>& host_keys();

/// Fills every member that has a host key from `resolved`, a run table that
/// validate_host_table() accepted and complete_host_table() completed (so every key is present
/// with its type). Component tables and [[optim.param_groups]] are left to the caller.
/// Members of a value kind get the parsed value (amp.precision a Precision, train.max_time_seconds).
void read_host_keys(const toml::table& resolved, RunConfig& cfg);

}  // namespace tp
