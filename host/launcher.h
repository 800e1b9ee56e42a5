// The built-in launcher: `host --nproc-per-node N [--nnodes M --node-rank R --master-addr A
// --master-port P] train ...` starts N ranks of this executable on this node with torchrun's
// environment contract (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// for users without Python. It prefixes each rank's output lines with "[rank k] ", forwards
// SIGINT/SIGTERM, and when a rank fails it stops the others and exits non-zero naming that rank.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tp::cli {

/// The launcher's flags and the command line each rank runs.
struct LaunchOptions {
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;       ///< "" = 127.0.0.1 (single node only)
  int master_port = 0;           ///< 0 = a free port (single node only)
  std::vector<std::string> args; ///< argv of each rank, without the launcher flags
};

/// Takes the launcher flags out of argv. Returns nullopt when --nproc-per-node is absent (a plain
/// single-process run). Throws ConfigError (exit 2) for bad values, or for several nodes without
/// --master-addr and --master-port.
std::optional<LaunchOptions> parse_launch(int argc, char** argv);

/// Starts the ranks and waits for them. Returns 0 when all succeed; otherwise the first failed
/// rank's exit status (128 + signal when it was killed), after stopping the others: SIGTERM,
/// then SIGKILL after a 10 s grace period.
int run_launcher(const LaunchOptions& options);

}  // namespace tp::cli
