// A job's ranks agree on how start-up went before they meet in a collective (docs/distributed.md,
// "Failures"): only rank 0 claims the run directory and talks to the MLflow server, and a refusal
// there used to leave the other ranks to fail in their next collective on LibTorch's "Failed to
// recv" and its backtrace, naming nothing the user could change.
#pragma once

#include <functional>
#include <string>

namespace tp {
class DistContext;
struct RunConfig;
}

namespace tp::cli {

/// [all ranks] Runs `step`, then, in a job of several ranks (`dist` not null), makes one rank's
/// failure every rank's in one agreement (DistContext::first_failure): the failing rank rethrows
/// its own error; every other rank throws tp::Error "rank R: <its message> ... (<what>)" of the
/// lowest failing rank, with that rank's exit code, so the job ends with one reason and no
/// rank waits in a collective for a rank that left. Without `dist` it only runs `step`.
/// `what` names the agreement in that message and in a failed collective's ("agree on the run
/// directory's claim").
void run_agreed(DistContext* dist, const char* what, const std::function<void()>& step);

/// [all ranks] Compares `own` with rank 0's text for `name` (DistContext::rank0_text, through the
/// store, no collective) in one agreement (run_agreed, `what`): a rank whose text differs calls
/// `refuse(rank0_text)`, which throws its reason, and every rank ends with the lowest such rank's
/// reason and exit code. For what the ranks must share before a collective depends on it.
void agree_with_rank0(DistContext* dist, const char* what, const std::string& name, const std::string& own,
                      const std::function<void(const std::string& rank0)>& refuse);

/// [all ranks, before any collective whose shape depends on the configuration] Makes sure every
/// rank resolved the same configuration (file, environment mirrors, --set): each rank compares
/// its resolved table with rank 0's, leaving out what is resolved per process (run.output_dir and
/// plugins.dirs, made absolute against each rank's working directory). On a difference every rank
/// ends with exit 2 and one paragraph naming the first differing key and both values; ranks that
/// trained together on different settings (another lr, seed or epoch count) were silently wrong
/// or hung in mismatched collectives (cluster trial F2). Without `dist` it does nothing.
void agree_on_config(DistContext* dist, const RunConfig& config);

}  // namespace tp::cli
