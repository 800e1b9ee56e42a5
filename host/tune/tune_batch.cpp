// `host tune batch-size --config FILE [--headroom 0.1] [--max N] [--keep-global-batch]
// [--memory-limit SIZE] [--set ...] [--output-dir DIR]`: the largest micro-batch whose full step
// (forward, backward, optimizer, and an evaluation batch) fits the device with the stated
// headroom, found by doubling and then bisecting (tune_batch_search.h, docs/tune.md).
//
// Choices, and why:
// - Each trial is a fresh child `host train` (train.max_steps = 2, train.overfit_batches = 1: two
//   optimizer steps and two evaluations, all on the first micro-batch) writing into
//   <run dir>/tune/batch-<time>/b<N>/. Only a process's end gives its memory back to the device
//   and the OS whole (the caching allocator, fragmentation, LibTorch's pools), so a trial in a
//   fresh process measures what that micro-batch costs, not what the trials before it left.
//   Two steps, because the optimizer's state appears in step 1 and is already there, with the
//   next activations, in step 2.
// - CUDA: the limit is the device's memory (report.toml's device_total_mb, read from the trial
//   itself so this process never creates a CUDA context that would hold device memory), the peak
//   the caching allocator's peak of allocated bytes (peak_device_mb); a trial that runs out of
//   memory fails by itself (its message says "out of memory").
// - CPU: there is no device to fill, and a machine's free memory is not a stable number, so the
//   limit must be given (--memory-limit). The peak is the child's peak resident set size from
//   wait4 (ru_maxrss): LibTorch, plugins, the loader's queue and the tensors together. A trial
//   whose peak passes the allowance is killed at once (SIGKILL, polled every ~0.1 s from
//   /proc/<pid>/status VmHWM), so a doubling past the limit does not push the machine into swap.
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "child_process.h"
#include "commands.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/util/atomic_file.h"
#include "tune/tune_batch_search.h"
#include "tune/tune_common.h"
#include "tune/tune_memory.h"

namespace tp::cli {
namespace {

namespace fs = std::filesystem;

/// One trial's outcome, a row of the printed table.
struct Trial {
  int64_t batch = 0;
  double peak_mb = std::nan(""); ///< NaN when the run ended before it could say
  bool fits = false;
  std::string note;
};

std::vector<std::string> trial_settings(int64_t batch) {
  return {"train.batch_size=" + std::to_string(batch),
          "train.grad_accum_steps=1",
          "train.max_steps=2",
          "train.overfit_batches=1",
          "train.fast_dev_run=false",
          "train.max_time=\"\"",
          "eval.strategy=\"epoch\"",
          "eval.every=1",
          "early_stopping.patience=0",
          "checkpoint.strategy=\"no\"",
          "checkpoint.load_best_at_end=false",
          "schedule.name=\"constant\"",
          "swa.enabled=false",
          "plots.enabled=false",
          "logging.tensorboard=false",
          "progress.mode=\"off\""};
}

/// The training split's size: a micro-batch larger than it is never drawn. Prepares and creates
/// the dataset once in this process (the children then find it prepared).
int64_t train_split_size(const Session& session) {
  const RunConfig& config = session.config;
  prepare_datasets(config, session.registry, DatasetSplits{.train = true, .val = false}, 0, nullptr);
  const ComponentConfig& table = *dataset_table(config, "train");
  const DatasetProxy dataset(session.registry.find(table.component, TP_KIND_DATASET, table.key_path), table, "train");
  return static_cast<int64_t>(dataset.size());
}

/// Everything a trial needs to know and the table it fills.
struct TrialRunner {
  const Options& options;
  const fs::path& scratch;
  bool cpu;
  double limit_mb;   ///< NaN on an accelerator until a trial reports its memory (no --memory-limit)
  double headroom;
  SignalForwarder& signals;
  std::vector<Trial> trials;

  double allowance_mb() const { return (1.0 - headroom) * limit_mb; }

  /// Runs the trial of `batch`; nothing when it was stopped by a signal, which the caller handles.
  /// Throws tp::Error (with the child's exit code in `failed_exit`) for a failure that is not
  /// about memory.
  std::optional<Trial> run(int64_t batch, int& failed_exit) {
    const fs::path dir = scratch / ("b" + std::to_string(batch));
    fs::create_directories(dir);
    ChildOptions child;
    child.output = dir / "output.log";
    double watched_mb = 0; // the high-water mark that stopped the trial
    if (cpu)
      child.watch = [this, &watched_mb](pid_t pid) {
        const double mb = high_water_mb(pid);
        if (!(mb > allowance_mb())) return 0;
        watched_mb = mb;
        return SIGKILL;
      };
    const auto start = std::chrono::steady_clock::now();
    const ChildExit exit = signals.run(child_train_command(options, trial_settings(batch), dir), child);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (exit.forwarded_signal != 0) return std::nullopt;
    Trial t{batch, std::nan(""), false, ""};
    if (cpu) t.peak_mb = static_cast<double>(exit.max_rss_kb) * 1024.0 / 1e6;
    if (exit.watch_signal != 0) {
      // wait4's maximum can come back below what /proc showed when the trial was stopped (the
      // kernel's accounting of a killed process): the peak is at least what passed the allowance.
      t.peak_mb = std::max(t.peak_mb, watched_mb);
      t.note = "stopped above the allowance";
    } else if (exit.exit_code == kExitOk) {
      if (!cpu) {
        toml::table report;
        try {
          report = parse_toml_file(dir / "report.toml");
        } catch (const toml::parse_error& e) {
          throw Error("host tune batch-size: the trial run in " + dir.string() + " finished but its report.toml "
                      "does not read (" + std::string(e.description()) + "), so its peak memory is unknown.");
        }
        t.peak_mb = report["peak_device_mb"].value_or(std::nan(""));
        if (std::isnan(limit_mb)) limit_mb = report["device_total_mb"].value_or(std::nan(""));
        if (!std::isfinite(limit_mb))
          throw Error("host tune batch-size: the trial run in " + dir.string() + " could not read the device's "
                      "total memory (report.toml has no device_total_mb). Give the limit with --memory-limit SIZE.");
      }
      t.fits = t.peak_mb <= allowance_mb();
    } else if (exit.killed && exit.exit_code == exit_code_for_signal(SIGKILL)) {
      t.note = "killed by SIGKILL (the kernel's out-of-memory killer?)";
    } else if (says_out_of_memory(child.output)) {
      t.note = "out of memory";
    } else {
      failed_exit = exit.exit_code;
      throw Error("host tune batch-size: the trial of micro-batch " + std::to_string(batch) +
                  " failed with exit code " + std::to_string(exit.exit_code) + " for a reason other than memory, "
                  "so the search stops. The end of " + child.output.string() + ":\n" + tail_of(child.output, 15));
    }
    std::fprintf(stderr, "host tune batch-size: micro-batch %lld: peak %s MB, %s (%.1f s)%s%s\n",
                 static_cast<long long>(batch),
                 std::isfinite(t.peak_mb) ? format_number(std::round(t.peak_mb)).c_str() : "-",
                 t.fits ? "fits" : "does not fit", seconds, t.note.empty() ? "" : ": ", t.note.c_str());
    std::fflush(stderr);
    trials.push_back(t);
    return t;
  }
};

std::string trial_table(const std::vector<Trial>& trials) {
  std::string out = "  batch   peak MB  fits\n";
  char line[256];
  for (const Trial& t : trials) {
    std::snprintf(line, sizeof line, "%7lld  %8s  %s%s%s\n", static_cast<long long>(t.batch),
                  std::isfinite(t.peak_mb) ? format_number(std::round(t.peak_mb)).c_str() : "-",
                  t.fits ? "yes" : "no", t.note.empty() ? "" : t.fits ? "   " : "    ", t.note.c_str());
    out += line;
  }
  return out;
}

std::string trial_csv(const std::vector<Trial>& trials, double allowance_mb) {
  std::string out = "batch,peak_mb,allowance_mb,fits,note\n";
  for (const Trial& t : trials)
    out += std::to_string(t.batch) + "," + format_number(t.peak_mb) + "," + format_number(allowance_mb) + "," +
           (t.fits ? "1" : "0") + "," + t.note + "\n";
  return out;
}

}  // namespace

int run_tune_batch_size(const Options& options) {
  // First: a Ctrl-C while the plugins load then stops the tune before it has written anything.
  SignalForwarder signals;
  const auto session = open_tune_session(options, trial_settings(1), "host tune batch-size");
  const RunConfig& config = session->config;
  const bool cpu = session->device().is_cpu();
  if (cpu && options.memory_limit.empty())
    throw ConfigError("--memory-limit",
                      "host tune batch-size on the CPU needs --memory-limit SIZE (e.g. --memory-limit 4GiB): there is "
                      "no device memory to fill, and the machine's free memory changes with everything else it "
                      "runs. Each trial's peak resident set size is measured against the limit you give.");
  const double limit_mb = options.memory_limit.empty() ? std::nan("") : parse_memory_size(options.memory_limit) / 1e6;
  const int64_t global = config.train.batch_size * config.train.grad_accum_steps;
  const int64_t split = train_split_size(*session);
  if (const int signal = signals.received()) return stopped_before_start("host tune batch-size", signal);
  int64_t max = split;
  if (options.max_batch > 0) max = std::min(max, options.max_batch);
  if (options.keep_global_batch) max = std::min(max, global);
  ScratchDir scratch(session->run_dir, "batch");
  const std::string peak = cpu ? "resident set size (CPU)" : "memory allocated on the device";
  const std::string limit = options.memory_limit.empty()
                                ? std::string("the device's memory")
                                : "--memory-limit (" + format_number(std::round(limit_mb)) + " MB)";
  std::fprintf(stderr,
               "host tune batch-size: trying micro-batches from %lld up to %lld (the training split has %lld "
               "samples); each trial is two optimizer steps and an evaluation batch in a fresh process, in %s. A size "
               "fits when the trial's peak %s is at most (1 - %g) x %s.\n",
               static_cast<long long>(config.train.batch_size), static_cast<long long>(max),
               static_cast<long long>(split), scratch.path().c_str(), peak.c_str(), options.headroom, limit.c_str());
  std::fflush(stderr);

  TrialRunner runner{options, scratch.path(), cpu, limit_mb, options.headroom, signals, {}};
  BatchSearch search(config.train.batch_size, max);
  while (const std::optional<int64_t> batch = search.next()) {
    int failed_exit = kExitRuntime;
    std::optional<Trial> trial;
    if (signals.received() == 0) {
      try {
        trial = runner.run(*batch, failed_exit);
      } catch (const Error& e) {
        std::printf("%s", trial_table(runner.trials).c_str());
        std::fprintf(stderr, "%s\n", e.what());
        return failed_exit;
      }
    }
    if (!trial) {
      scratch.discard();
      const int signal = signals.received();
      std::fprintf(stderr,
                   "host tune batch-size: stopped by signal %d; the trials were discarded and %s is as it was.\n",
                   signal, session->run_dir.c_str());
      return exit_code_for_signal(signal);
    }
    search.record(trial->batch, trial->fits);
  }

  const double allowance = runner.allowance_mb();
  write_file_atomically(session->run_dir / "tune" / "batch_size.csv", trial_csv(runner.trials, allowance));
  std::printf("micro-batch trials (fits: peak <= %s MB = (1 - %g) x %s MB, %s):\n%s",
              format_number(std::round(allowance)).c_str(), options.headroom,
              format_number(std::round(runner.limit_mb)).c_str(),
              cpu ? "peak resident set size of the process, CPU" : "peak allocated on the device",
              trial_table(runner.trials).c_str());
  const int64_t best = search.result();
  if (best == 0)
    throw Error("host tune batch-size: not even a micro-batch of 1 fits under " + format_number(std::round(allowance)) +
                " MB; the table above shows what each trial used. Raise --memory-limit or lower --headroom, or make "
                "the model or its inputs smaller.");
  const char* cap = "";
  if (best == max && best == split) cap = " (the whole training split)";
  else if (best == max && options.keep_global_batch && best == global)
    cap = " (the global batch: --keep-global-batch never needs a larger micro-batch)";
  else if (best == max) cap = " (the --max cap)";
  std::printf("largest micro-batch that fits: %lld%s\n", static_cast<long long>(best), cap);
  if (options.keep_global_batch) {
    int64_t micro = best;
    while (global % micro != 0) --micro; // the largest divisor of the global batch that fits
    std::printf("keeping the global batch %lld (train.batch_size %lld x train.grad_accum_steps %lld):\n",
                static_cast<long long>(global), static_cast<long long>(config.train.batch_size),
                static_cast<long long>(config.train.grad_accum_steps));
    std::printf("  --set train.batch_size=%lld --set train.grad_accum_steps=%lld\n", static_cast<long long>(micro),
                static_cast<long long>(global / micro));
  } else {
    std::printf("  --set train.batch_size=%lld\n", static_cast<long long>(best));
    const int64_t new_global = best * config.train.grad_accum_steps;
    if (new_global != global)
      std::printf("this changes the global batch from %lld to %lld (x train.grad_accum_steps %lld): the lr may need "
                  "to change with it; --keep-global-batch keeps it\n",
                  static_cast<long long>(global), static_cast<long long>(new_global),
                  static_cast<long long>(config.train.grad_accum_steps));
  }
  std::printf("wrote %s\n", (session->run_dir / "tune" / "batch_size.csv").c_str());
  return kExitOk;
}

}  // namespace tp::cli
