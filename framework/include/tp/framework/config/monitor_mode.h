// Which way a monitored value improves, for checkpoint.mode, early_stopping.mode and
// schedule.mode = "auto" (the default): decided from the value's name, as timm does from its
// eval metric, so that monitoring val/accuracy without a mode no longer keeps the worst
// checkpoint (a "min" default did, silently).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace tp {

/// Whether a lower `name` (an evaluated value: "val/loss", "val_ema/top5_accuracy", "val/map_50")
/// is better, judged from its words: "loss", "error", "mae", "mse", ... anywhere mean lower;
/// "accuracy", "f1", "iou", "map", "auc", ... in its last part mean higher. Nothing when the name
/// says neither.
std::optional<bool> lower_is_better_by_name(std::string_view name);

/// Replaces each "auto" of checkpoint.mode, early_stopping.mode and schedule.mode in the
/// completed host table `root` with "min" or "max" for its table's `monitor`, so the resolved
/// config.toml records the direction used. A name that says neither stays "auto": only training
/// needs the direction (require_monitor_directions), and a command that never ranks by it (eval,
/// predict, plugins) must not refuse the run's config.
void resolve_monitor_modes(toml::table& root);

struct RunConfig;

/// A monitored value training uses, borrowed from its RunConfig.
struct MonitorInUse {
  const char* table;          ///< "checkpoint", "early_stopping" or "schedule"
  const std::string& monitor; ///< the table's monitor
  const std::string& mode;    ///< the table's mode ("auto" where its name said neither)
  const char* turned_off_by;  ///< ", or <the keys that stop its use>", for a refusal; "" for the schedule
};
/// The monitors training uses, in that order: checkpoint's when a best is kept or loaded, early
/// stopping's when it is on, the schedule's under reduce_on_plateau.
std::vector<MonitorInUse> monitors_in_use(const RunConfig& config);

/// [training] Throws ConfigError, naming the mode key, for a mode still "auto" among
/// monitors_in_use.
void require_monitor_directions(const RunConfig& config);

}  // namespace tp
