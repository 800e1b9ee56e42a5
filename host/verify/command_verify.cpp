// `host verify` (docs/verify.md): runs the chosen checks on the run's configuration and plugins,
// prints a row per check as it finishes, and exits kExitVerifyFailed when any fails. The checks'
// runs and logs go to <run dir>/verify/<check>/; a check that passes or is skipped removes its
// directory, a failed one keeps it for the diagnosis its row points to.
#include <chrono>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "tp/framework/config/load.h"
#include "tp/framework/dist/rendezvous.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "verify/verify.h"

namespace tp::cli {
namespace {

using verify::CheckResult;
using verify::Status;
using verify::VerifyContext;

using CheckFunction = CheckResult (*)(VerifyContext&);

CheckFunction check_function(const std::string& name) {
  if (name == "data") return &verify::check_data;
  if (name == "loss") return &verify::check_loss;
  if (name == "metric") return &verify::check_metric;
  if (name == "gradients") return &verify::check_gradients;
  if (name == "accumulation") return &verify::check_accumulation;
  if (name == "resume") return &verify::check_resume;
  if (name == "distributed") return &verify::check_distributed;
  if (name == "overfit") return &verify::check_overfit;
  throw Error("host verify: no check named '" + name + "'"); // cli.cpp validated --checks
}

/// Runs one check. A configuration or plugin-loading problem ends `host verify` (exit 2 or 3: no
/// check can run); any other failure, a plugin call included, is this check's FAIL row.
CheckResult run_check(const std::string& name, VerifyContext& context) {
  try {
    return check_function(name)(context);
  } catch (const ConfigError&) {
    throw;
  } catch (const PluginLoadError&) {
    throw;
  } catch (const Interrupted&) {
    throw; // Ctrl-C: the child saved and stopped; so does host verify (exit 130/143)
  } catch (const std::exception& e) {
    CheckResult row(name, "");
    row.status = Status::kFail;
    row.reason = e.what();
    return row;
  }
}

}  // namespace

int run_verify(const Options& options) {
  if (read_rendezvous(process_environment()).distributed())
    throw ConfigError("", "host verify starts its own 2-rank runs (the distributed check): run it as one process, "
                          "without --nproc-per-node or torchrun.");
  auto session = open_session(options);
  const std::filesystem::path work_dir = session->run_dir / "verify";
  std::filesystem::remove_all(work_dir); // the previous verify's leftovers
  std::filesystem::create_directories(work_dir);
  verify::print_header(options.config, work_dir);

  VerifyContext context(options, *session, work_dir);
  int counts[3] = {0, 0, 0}; // by Status
  for (const std::string& name : options.verify_checks) {
    const auto start = std::chrono::steady_clock::now();
    CheckResult row = run_check(name, context);
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    verify::print_row(row);
    ++counts[static_cast<int>(row.status)];
    if (row.status != Status::kFail) std::filesystem::remove_all(work_dir / name);
  }
  const int failed = counts[static_cast<int>(Status::kFail)];
  std::printf("\n%d passed, %d failed, %d skipped", counts[static_cast<int>(Status::kPass)], failed,
              counts[static_cast<int>(Status::kSkip)]);
  if (failed > 0) {
    std::printf("; the failed checks' runs and logs are in %s\n", work_dir.c_str());
    return kExitVerifyFailed;
  }
  std::filesystem::remove_all(work_dir);
  std::printf("\n");
  return kExitOk;
}

}  // namespace tp::cli
