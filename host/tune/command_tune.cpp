// `host tune lr|batch-size` (docs/tune.md): one command, two searches, each in its own file
// (tune_lr.cpp, tune_batch.cpp) over the shared pieces of tune_common.h.
#include "commands.h"
#include "tune/tune_common.h"

namespace tp::cli {

int run_tune(const Options& options) {
  if (options.action == "lr") return run_tune_lr(options);
  return run_tune_batch_size(options);
}

}  // namespace tp::cli
