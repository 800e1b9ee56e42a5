// `host`: parse the command line, run the subcommand, map failures to exit codes (tp::ExitCode in
// tp/framework/error.h, the one table). With --nproc-per-node this process is the launcher: it
// starts the ranks (each a `host` without the launcher flags) and waits.
#include <csignal>
#include <cstdio>
#include <exception>

#include "cli.h"
#include "commands.h"
#include "launcher.h"
#include "tp/framework/error.h"

int main(int argc, char** argv) {
  using namespace tp;
  // A file-size limit (ulimit -f, a quota) must surface as EFBIG from write(), which the
  // checkpoint writer reports with the file and keeps the previous checkpoint; SIGXFSZ's default
  // action would kill the process before it could say why.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    if (const auto launch = cli::parse_launch(argc, argv)) return cli::run_launcher(*launch);
    const cli::Options options = cli::parse(argc, argv);
    if (options.help) {
      std::printf("%s", options.help_text.c_str());
      return kExitOk;
    }
    if (options.command == "plugins") return cli::run_plugins(options);
    if (options.command == "eval") return cli::run_eval(options);
    if (options.command == "export") return cli::run_export(options);
    if (options.command == "plot") return cli::run_plot(options);
    if (options.command == "profile") return cli::run_profile(options);
    return cli::run_train(options);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "host: configuration error: %s\n", e.what());
    return e.exit_code();
  } catch (const PluginLoadError& e) {
    std::fprintf(stderr, "host: plugin error: %s\n", e.what());
    return e.exit_code();
  } catch (const Error& e) {
    std::fprintf(stderr, "host: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host: unexpected error: %s\n", e.what());
    return kExitRuntime;
  }
}
