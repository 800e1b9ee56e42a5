// A job's ranks agree on how start-up went before they meet in a collective (docs/distributed.md,
// "Failures"): only rank 0 claims the run directory and talks to the MLflow server, and a refusal
// there used to leave the other ranks to fail in their next collective on LibTorch's "Failed to
// recv" and its backtrace, naming nothing the user could change.
#pragma once

#include <functional>

namespace tp {
class DistContext;
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

}  // namespace tp::cli
