// `host sweep --config FILE --grid KEY=V1,V2 [--grid ...] [--set ...] [--output-dir DIR]
// [--metric NAME]`: trains every cell of the grid one after another, each as a child `host train`
// into DIR/<cell name>, records each finished cell in DIR/sweep.toml, then writes the comparison
// of the cells into DIR (docs/experiments.md).
//
// Choices, and why:
// - Every cell's configuration is loaded and validated (host keys, component schemas, precision
//   on the device) before the first cell trains: a typo in the fourth cell costs no training.
// - A cell is a child process, not a second Trainer in this process: each cell starts from a
//   clean process (allocator caches, peak-memory counters, plugin state), so cells compare fairly,
//   and a cell that crashes takes only itself down.
// - The first failing cell stops the sweep with its exit code. Cells of a grid share almost all
//   of their configuration, so what failed one (data, disk, memory) most likely fails the next;
//   rerunning the same command after the fix skips the finished cells. With --keep-going a
//   failed cell is recorded (its exit code and reason, sweep_failure.h) and the next one trains:
//   a grid's divergent high-lr end is an expected result, not an error to fix (experiments
//   trial F2); the sweep exits with the first failure's code and names every failed cell.
// - One sweep per directory (sweep_lock.h): a second one is refused before it reads sweep.toml.
// - A rerun skips the cells sweep.toml records as done and resumes the others (--resume auto),
//   after checking that the config.toml of each done or resumable cell still matches what the
//   sweep would train now.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>

#include "child_process.h"
#include "commands.h"
#include "session.h"
#include "sweep/sweep_comparison.h"
#include "sweep/sweep_failure.h"
#include "sweep/sweep_grid.h"
#include "sweep/sweep_lock.h"
#include "sweep/sweep_record.h"
#include "tp/framework/amp/precision.h"
#include "tp/framework/config/flatten.h"
#include "tp/framework/config/load.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/log.h"
#include "tp/framework/util/stale_temporaries.h"

namespace tp::cli {
namespace {

namespace fs = std::filesystem;

/// A cell and what the sweep knows about it before training.
struct PlannedCell {
  SweepCell cell;
  fs::path dir;
  FlatConfig config; ///< its resolved configuration, flattened
};

std::vector<std::string> cell_sets(const Options& options, const SweepCell& cell) {
  std::vector<std::string> sets = options.sets;
  sets.insert(sets.end(), cell.overrides.begin(), cell.overrides.end());
  return sets;
}

std::string describe(const SweepCell& cell) {
  std::string text;
  for (const std::string& o : cell.overrides) text += (text.empty() ? "--set " : " --set ") + o;
  return text;
}

// 1. Every cell's configuration, validated as `host train` would validate it: host keys first
//    (no plugin loaded), then the plugins once and every component table, then the precision on
//    the device.
//    The sweep directory is --output-dir, else run.output_dir of the first cell (the config's,
//    unless a grid sets it).
struct Plan {
  fs::path dir; ///< the sweep directory
  std::vector<PlannedCell> cells;
  RunConfig first; ///< the first cell's configuration ([logging.mlflow] of the sweep's parent run)
};

Plan plan(const Options& options, const std::vector<SweepCell>& cells) {
  const auto env = process_environment();
  std::vector<RunConfig> configs;
  const auto in_cell = [](const SweepCell& cell, const ConfigError& e) {
    return ConfigError(e.key_path(), "host sweep: the cell '" + cell.name + "' (" + describe(cell) + "): " + e.what() +
                                         " Nothing was trained.");
  };
  for (const SweepCell& cell : cells) {
    try {
      configs.push_back(load_run_config(options.config, cell_sets(options, cell), env));
    } catch (const ConfigError& e) {
      throw in_cell(cell, e);
    }
  }
  const fs::path sweep_dir =
      options.output_dir.empty() ? fs::path(configs.front().run.output_dir) : fs::path(options.output_dir);
  Options first = options;
  first.sets = cell_sets(options, cells.front());
  // The plugins, with the config's plugin dirs; opening the session checks the first cell's
  // component tables, so its mistakes are that cell's too.
  const auto session = [&] {
    try {
      return open_session(first);
    } catch (const ConfigError& e) {
      throw in_cell(cells.front(), e);
    }
  }();
  std::vector<PlannedCell> planned;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    try {
      resolve_components(configs[i], session->registry);
      check_precision_supported(configs[i].amp.precision, resolve_device(configs[i].run.device));
      check_schedule_options(configs[i].schedule, configs[i].optim.lr);
    } catch (const ConfigError& e) {
      throw in_cell(cells[i], e);
    }
    planned.push_back({cells[i], sweep_dir / cells[i].name, flatten_config(configs[i].resolved)});
  }
  return {sweep_dir, std::move(planned), std::move(configs.front())};
}

// A cell's run directory trained with the configuration it would get now; otherwise the
// comparison would mix old and new settings. `how` says what the earlier attempt did.
void require_same_configuration(const PlannedCell& p, const std::string& how, const std::string& remedy) {
  FlatConfig trained;
  try {
    trained = with_host_defaults(flatten_config(parse_toml_file(p.dir / "config.toml")));
  } catch (const toml::parse_error& e) {
    throw Error("host sweep: " + (p.dir / "config.toml").string() + " does not parse (" + std::string(e.description()) +
                "), so the cell '" + p.cell.name + "' (" + how + ") cannot be checked. Delete " + p.dir.string() +
                " to train it again.");
  }
  std::string changes;
  for (const std::string& key : differing_keys(p.config, trained)) {
    const auto was = trained.find(key);
    const auto now = p.config.find(key);
    changes += (changes.empty() ? "" : "; ") + key + ": was " +
               (was == trained.end() ? "unset" : was->second.literal) + ", now " +
               (now == p.config.end() ? "unset" : now->second.literal);
  }
  if (!changes.empty())
    throw ConfigError("", "host sweep: the cell '" + p.cell.name + "' in " + p.dir.string() + " " + how +
                              " with another configuration than the sweep would train now (" + changes +
                              "): the config file, --set, a TP_* environment variable or a plugin's defaults changed" +
                              remedy + ". Give the changed sweep a new --output-dir, or delete " + p.dir.string() +
                              " to train that cell again.");
}

// The cell's directory holds a checkpoint that `host train --resume auto` continues from.
bool has_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir / "checkpoints", ec))
    for (const auto& entry : fs::directory_iterator(dir / "checkpoints", ec))
      if (entry.path().extension() == ".pt") return true;
  return false;
}

// A cell recorded as done is skipped only when its run directory was trained with the
// configuration it would get now.
bool finished_earlier(const SweepRecord& record, const PlannedCell& p) {
  const CellRecord* entry = record.find(p.cell.name);
  if (entry == nullptr || entry->status != "done") return false;
  std::error_code ec;
  if (!fs::exists(p.dir / "config.toml", ec)) {
    std::fprintf(stderr, "host sweep: %s is recorded as done but %s is gone; training it again\n",
                 p.cell.name.c_str(), (p.dir / "config.toml").c_str());
    return false;
  }
  require_same_configuration(p, "finished", "");
  return true;
}

// Before any cell trains: a stopped cell that would resume is held to the same rule as a done
// one. Resumed under a changed configuration it would continue the checkpoint's optimizer and
// schedule while its config.toml, and the comparison, said the new settings (exp trial F3).
void check_resumable_cells(const SweepRecord& record, const std::vector<PlannedCell>& planned) {
  std::error_code ec;
  for (const PlannedCell& p : planned) {
    const CellRecord* entry = record.find(p.cell.name);
    if ((entry != nullptr && entry->status == "done") || !has_checkpoint(p.dir) || !fs::exists(p.dir / "config.toml", ec))
      continue;
    require_same_configuration(p, "stopped", ", and resuming it would mix the two");
  }
}

// A cell this grid spells differently from a cell sweep.toml records (`optim.lr=1e-2` for
// `optim.lr=0.01`, or its axes in another order) is that cell, by value: it takes the recorded
// name and directory, so a finished one is skipped and a stopped one resumed instead of a
// duplicate trained (experiments trial F3).
void adopt_recorded_names(const SweepRecord& record, std::vector<PlannedCell>& planned, const fs::path& sweep_dir) {
  for (PlannedCell& p : planned) {
    if (record.find(p.cell.name) != nullptr) continue;
    for (const CellRecord& recorded : record.cells()) {
      if (!same_settings(recorded.overrides, p.cell.overrides)) continue;
      const bool taken = std::any_of(planned.begin(), planned.end(),
                                     [&](const PlannedCell& other) { return other.cell.name == recorded.name; });
      if (taken) break;
      std::fprintf(stderr, "host sweep: the cell %s has the values of %s, recorded in %s: it is that cell\n",
                   p.cell.name.c_str(), recorded.name.c_str(), (sweep_dir / "sweep.toml").c_str());
      p.cell.name = recorded.name;
      p.dir = sweep_dir / recorded.name;
      break;
    }
  }
}

// A cell that never finished and left no checkpoint to resume from would start fresh and append
// to its old history; its previous attempt is moved aside instead (kept for its train.log).
void set_aside_unresumable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec) || has_checkpoint(dir)) return;
  fs::path aside;
  for (int k = 1; aside.empty() || fs::exists(aside, ec); ++k)
    aside = dir.string() + ".attempt-" + std::to_string(k);
  fs::rename(dir, aside, ec);
  if (ec) throw Error("host sweep: cannot move the unfinished " + dir.string() + " aside to " + aside.string() + ": " +
                      ec.message() + ". Move or delete it yourself, then run the sweep again.");
  std::fprintf(stderr, "host sweep: %s held an unfinished attempt without a checkpoint; moved to %s\n", dir.c_str(),
               aside.c_str());
}

std::string log_of(const fs::path& dir) {
  std::error_code ec;
  const fs::path log = dir / "train.log";
  return fs::exists(log, ec) ? "its log is " + log.string()
                             : "its output is above (it stopped before writing " + log.string() + ")";
}

std::vector<std::string> train_args(const Options& options, const LaunchOptions* launch, const PlannedCell& p,
                                    const std::string& mlflow_parent) {
  std::vector<std::string> args{"host"};
  if (launch != nullptr) {
    args.insert(args.end(), {"--nproc-per-node", std::to_string(launch->nproc_per_node)});
    if (!launch->master_addr.empty()) args.insert(args.end(), {"--master-addr", launch->master_addr});
    if (launch->master_port != 0) args.insert(args.end(), {"--master-port", std::to_string(launch->master_port)});
  }
  args.insert(args.end(), {"train", "--config", options.config});
  for (const std::string& set : cell_sets(options, p.cell)) args.insert(args.end(), {"--set", set});
  // The cell's MLflow run nests under the sweep's (a tracking location: sweeps compare without it).
  if (!mlflow_parent.empty()) args.insert(args.end(), {"--set", "logging.mlflow.parent_run_id=\"" + mlflow_parent + "\""});
  args.insert(args.end(), {"--output-dir", p.dir.string(), "--resume", "auto"});
  for (const std::string& dir : options.plugin_dirs) args.insert(args.end(), {"--plugin-dir", dir});
  if (options.allow_insecure_plugin_dir) args.push_back("--allow-insecure-plugin-dir");
  if (options.verbose) args.push_back("--verbose");
  return args;
}

// The directories of the first `count` planned cells.
std::vector<fs::path> cell_dirs(const std::vector<PlannedCell>& planned, std::size_t count) {
  std::vector<fs::path> dirs;
  for (std::size_t i = 0; i < count; ++i) dirs.push_back(planned[i].dir);
  return dirs;
}

// A sweep stopped at a cell still compares the cells that trained, that one as far as it got
// (finished = no): a grid whose high-lr cell diverges shows what the others reached. The
// sweep's own exit code stands; a comparison that cannot be made only warns.
void compare_trained_cells(const Options& options, const fs::path& sweep_dir, const std::vector<PlannedCell>& planned,
                           std::size_t count, const std::vector<fs::path>& earlier) {
  std::error_code ec;
  const std::vector<fs::path> dirs = cell_dirs(planned, count);
  const auto trained = std::count_if(dirs.begin(), dirs.end(), [&](const fs::path& d) {
    return fs::exists(d / "history.jsonl", ec) && fs::exists(d / "config.toml", ec);
  });
  if (trained == 0) return;
  std::fprintf(stderr, "host sweep: comparing the %zu cell(s) that trained\n", static_cast<std::size_t>(trained));
  try {
    compare_sweep_cells(options, sweep_dir, dirs, earlier);
  } catch (const Error& e) {
    std::fprintf(stderr, "host sweep: no comparison was written: %s\n", e.what());
  }
}

// A --set or a TP_* variable on a grid's key would be overridden in every cell by the grid's
// value, silently, while sweep.toml recorded it (experiment trial F14).
void refuse_settings_the_grid_overrides(const Options& options, const SweepCell& cell) {
  const auto key_of = [](const std::string& assignment) { return assignment.substr(0, assignment.find('=')); };
  for (const std::string& axis : cell.overrides) {
    const std::string key = key_of(axis);
    if (key == "run.output_dir")
      throw ConfigError("--grid", "host sweep: the grid sets run.output_dir, which the sweep sets itself for each "
                                  "cell (<sweep dir>/<cell>): every cell would train the same. Give the sweep's "
                                  "directory with --output-dir instead. Nothing was trained.");
    for (const std::string& set : options.sets)
      if (key_of(set) == key)
        throw ConfigError("--set", "host sweep: --set " + set + " and the grid both set " + key +
                                       ": every cell would train with the grid's value. Drop the --set, or the "
                                       "axis. Nothing was trained.");
    const std::string variable = env_mirror_name(key);
    if (std::getenv(variable.c_str()) != nullptr)
      throw ConfigError("--grid", "host sweep: the environment variable " + variable + " and the grid both set " +
                                      key + ": every cell would train with the grid's value. Unset " + variable +
                                      ", or drop the axis. Nothing was trained.");
  }
}

}  // namespace

int run_sweep(const Options& options, const LaunchOptions* launch) {
  const auto env = process_environment();
  if (read_rendezvous(env).distributed())
    throw ConfigError("", "host sweep runs once and starts each cell itself; it was started as one rank of a "
                          "distributed job (RANK/WORLD_SIZE are set: torchrun, or a launcher). Start it once, "
                          "as `host --nproc-per-node N sweep ...` to train every cell data-parallel.");
  if (launch != nullptr && launch->nnodes > 1)
    throw ConfigError("--nnodes", "host sweep trains on one node (--nproc-per-node N); with --nnodes > 1 the "
                                  "sweeps of the nodes could disagree on which cells are done. Run `host "
                                  "--nnodes ... train --set ...` per cell instead.");
  const std::vector<SweepCell> cells = expand_grid(options.grid);
  refuse_settings_the_grid_overrides(options, cells.front());
  auto [sweep_dir, planned, first_config] = plan(options, cells);

  // Before sweep.toml is read: a second sweep on this directory is refused here, at once.
  const SweepLock lock(sweep_dir);
  for (const fs::path& removed : sweep_stale_temporaries(sweep_dir, /*levels=*/3))
    std::fprintf(stderr, "host sweep: removed %s, left by a process that no longer runs\n", removed.c_str());
  const fs::path record_file = sweep_dir / "sweep.toml";
  SweepRecord record = SweepRecord::read(record_file);
  adopt_recorded_names(record, planned, sweep_dir);
  std::vector<std::string> names;
  for (const PlannedCell& p : planned) names.push_back(p.cell.name);
  const std::vector<fs::path> earlier = earlier_finished_cells(record, names, sweep_dir);
  check_resumable_cells(record, planned);
  const auto save = [&](const PlannedCell& p, const std::string& status, int exit_code, const std::string& reason) {
    record.set({p.cell.name, p.cell.overrides, status, exit_code, reason});
    record.write(record_file, options.config, options.grid, options.sets);
  };
  // With [logging.mlflow] on, the sweep is a parent MLflow run and each cell a child of it.
  Logger log(0, options.verbose);
  const bool tracked = first_config.logging.mlflow.enabled;
  const std::string mlflow_parent =
      tracked ? start_mlflow_parent_run(first_config, sweep_dir, sweep_dir.filename().string(), log) : "";
  const auto end_parent = [&](MlflowEnd how) {
    if (!mlflow_parent.empty()) end_mlflow_parent_run(first_config, sweep_dir, how, log);
  };
  SignalForwarder signals;
  const std::size_t n = planned.size();
  std::vector<std::string> failures; // --keep-going: "name (exit N: reason)" of each failed cell
  int first_failure_code = kExitOk;
  for (std::size_t i = 0; i < n; ++i) {
    const PlannedCell& p = planned[i];
    const std::string where = "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + p.cell.name;
    if (finished_earlier(record, p)) {
      std::fprintf(stderr, "host sweep: %s: finished earlier, skipped\n", where.c_str());
      continue;
    }
    if (const int signal = signals.received()) {
      std::fprintf(stderr, "host sweep: stopped by signal %d before %s; run the same command again to continue.\n",
                   signal, where.c_str());
      end_parent(MlflowEnd::kKilled);
      return exit_code_for_signal(signal);
    }
    set_aside_unresumable(p.dir);
    std::fprintf(stderr, "host sweep: %s -> %s\n", where.c_str(), p.dir.c_str());
    std::fflush(stderr);
    save(p, "running", 0, "");
    const std::uintmax_t log_offset = train_log_size(p.dir);
    const ChildExit exit = signals.run(train_args(options, launch, p, mlflow_parent));
    if (exit.exit_code == kExitOk) {
      save(p, "done", 0, "");
      if (exit.forwarded_signal == 0) continue;
      std::fprintf(stderr, "host sweep: stopped by signal %d after %s finished; run the same command again to "
                   "continue with the next cell.\n", exit.forwarded_signal, where.c_str());
      end_parent(MlflowEnd::kKilled);
      return exit_code_for_signal(exit.forwarded_signal);
    }
    // `host train` exits 128 + a stop signal itself after saving (130, 143, 129...); killed by a
    // signal (a second Ctrl-C, the OOM killer), it saved nothing at that point.
    const bool interrupted = !exit.killed && std::ranges::any_of(kStopSignals, [&](int signal_number) {
                               return exit.exit_code == exit_code_for_signal(signal_number);
                             });
    const std::string reason =
        interrupted ? "" : cell_failure_reason(p.dir, log_offset, exit.exit_code, exit.killed);
    save(p, interrupted ? "interrupted" : "failed", exit.exit_code, reason);
    // A cell that failed by itself (not one a signal to the sweep stopped) is a result under
    // --keep-going: recorded, and the next cell trains.
    if (options.keep_going && !interrupted && exit.forwarded_signal == 0) {
      if (failures.empty()) first_failure_code = exit.exit_code;
      failures.push_back(p.cell.name + " (exit " + std::to_string(exit.exit_code) + ": " + reason + ")");
      std::fprintf(stderr, "host sweep: the cell %s failed with exit code %d: %s; %s. --keep-going: going on with the "
                   "next cell.\n", where.c_str(), exit.exit_code, reason.c_str(), log_of(p.dir).c_str());
      continue;
    }
    if (interrupted)
      std::fprintf(stderr, "host sweep: stopped in %s (exit %d); the cell saved its position in %s. To continue, run "
                   "the same command again: finished cells are skipped and this one resumes from its last.pt.\n",
                   where.c_str(), exit.exit_code, (p.dir / "checkpoints" / "last.pt").c_str());
    else if (exit.killed)
      std::fprintf(stderr, "host sweep: the cell %s was killed by signal %d before it could save; %s. Run the same "
                   "command again to continue: finished cells are skipped and this one resumes from its newest "
                   "checkpoint, if it wrote one.\n", where.c_str(), exit.exit_code - kExitSignalBase,
                   log_of(p.dir).c_str());
    else
      std::fprintf(stderr, "host sweep: the cell %s failed with exit code %d; %s. The cells after it were not "
                   "trained. Fix the cause and run the same command again: finished cells are skipped.\n",
                   where.c_str(), exit.exit_code, log_of(p.dir).c_str());
    end_parent(interrupted ? MlflowEnd::kKilled : MlflowEnd::kFailed);
    if (!interrupted) compare_trained_cells(options, sweep_dir, planned, i + 1, earlier); // a stop wants out at once
    return exit.exit_code;
  }
  end_parent(failures.empty() ? MlflowEnd::kFinished : MlflowEnd::kFailed);
  if (failures.empty()) {
    std::fprintf(stderr, "host sweep: all %zu cells finished; comparing them\n", n);
    return compare_sweep_cells(options, sweep_dir, cell_dirs(planned, n), earlier);
  }
  compare_trained_cells(options, sweep_dir, planned, n, earlier);
  std::string named;
  for (const std::string& failure : failures) named += "\n  " + failure;
  std::fprintf(stderr, "host sweep: %zu of %zu cells failed (recorded in %s):%s\nThe other cells finished. A rerun "
               "of the same command skips the finished cells and trains the failed ones again (resuming any that "
               "saved a checkpoint); to leave a cell out, drop its value from the grid.\n", failures.size(), n,
               record_file.c_str(), named.c_str());
  return first_failure_code;
}

}  // namespace tp::cli
