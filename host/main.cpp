// `host`: parse the command line, run the subcommand, map failures to exit codes (tp::ExitCode in
// tp/framework/error.h, the one table). With --nproc-per-node this process is the launcher: it
// starts the ranks (each a `host` without the launcher flags) and waits.
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <optional>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "launcher.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/framework/util/bounded_text.h"

int main(int argc, char** argv) {
  using namespace tp;
  // A file-size limit (ulimit -f, a quota) must surface as EFBIG from write(), which the
  // checkpoint writer reports with the file and keeps the previous checkpoint; SIGXFSZ's default
  // action would kill the process before it could say why.
  std::signal(SIGXFSZ, SIG_IGN);
  // A rank that dies closes its sockets: the survivor's next write to it must fail with EPIPE,
  // which Gloo reports and the host turns into its "lost rank(s)" error, not raise SIGPIPE, whose
  // default killed the survivor silently (exit 141, seen once in dist_tests' SIGKILL case).
  // Python's interpreter ignores it for every torchrun user; a C++ program must ask.
  std::signal(SIGPIPE, SIG_IGN);
  // LibTorch's log level from TORCH_CPP_LOG_LEVEL (INFO, WARNING, ERROR), as `import torch` sets it
  // for Python: a C++ program that does not ask keeps the compiled-in WARNING whatever the variable says.
  c10::initLogging();
  try {
    if (const auto launch = cli::parse_launch(argc, argv)) {
      // `host --nproc-per-node N sweep ...` is one sweep whose cells each run under the launcher.
      std::vector<char*> rank_argv;
      for (const auto& arg : launch->args) rank_argv.push_back(const_cast<char*>(arg.c_str()));
      std::optional<cli::Options> rank;
      try {
        rank = cli::parse(static_cast<int>(rank_argv.size()), rank_argv.data());
      } catch (const ConfigError&) {
        // Not a sweep we can read: each rank reports the command line's problem, as before.
      }
      if (rank && rank->command == "sweep" && !rank->help) return cli::run_sweep(*rank, &*launch);
      return cli::run_launcher(*launch);
    }
    const cli::Options options = cli::parse(argc, argv);
    // Before any command loads a plugin: a crash in a library's constructors, init, create,
    // prepare or destroy is named (exit 5) in every command, `plugins list` included; a run
    // installs it again to name its checkpoints (plugin/plugin_crash.h).
    install_plugin_crash_handler(nullptr);
    if (options.help) {
      std::printf("%s", options.help_text.c_str());
      return kExitOk;
    }
    if (options.version) return cli::print_version();
    if (options.command == "plugins") return cli::run_plugins(options);
    if (options.command == "eval") return cli::run_eval(options);
    if (options.command == "predict") return cli::run_predict(options);
    if (options.command == "sweep") return cli::run_sweep(options);
    if (options.command == "compare") return cli::run_compare(options);
    if (options.command == "export") return cli::run_export(options);
    if (options.command == "plot") return cli::run_plot(options);
    if (options.command == "mlflow-sync") return cli::run_mlflow_sync(options);
    if (options.command == "profile") return cli::run_profile(options);
    if (options.command == "verify") return cli::run_verify(options);
    if (options.command == "tune") return cli::run_tune(options);
    if (options.command == "shards") return cli::run_shards(options);
    return cli::run_train(options);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "host: configuration error: %s\n", bounded_text(e.what()).c_str());
    return e.exit_code();
  } catch (const Interrupted& e) {
    // A stop the user asked for, not an error: what was saved and how to go on.
    std::fprintf(stderr, "host: %s\n", bounded_text(e.what()).c_str());
    return e.exit_code();
  } catch (const PluginLoadError& e) {
    std::fprintf(stderr, "host: plugin error: %s\n", bounded_text(e.what()).c_str());
    return e.exit_code();
  } catch (const Error& e) {
    std::fprintf(stderr, "host: error: %s\n", bounded_text(e.what()).c_str());
    return e.exit_code();
  } catch (const c10::Error& e) {
    // LibTorch's own words, without the C++ backtrace of the host's frames (which names no plugin
    // and no key a user could change).
    std::fprintf(stderr, "host: unexpected error: %s\n", bounded_text(e.what_without_backtrace()).c_str());
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host: unexpected error: %s\n", bounded_text(e.what()).c_str());
    return kExitRuntime;
  }
}
