// The resume check: one run of --steps optimizer steps (at least 2) with run.deterministic = true
// saving step checkpoints, then a second run resumed from the save after half the steps (mid-epoch
// when the epoch is longer, which is the hard case: the loader's position, the RNG states, the
// schedule and the optimizer must all come back). Its final weights must be those of the
// uninterrupted run bit for bit. Whatever a plugin keeps outside the state it lends to the host
// (a counter in a model, a cache in a loss) or draws outside the host's generators (PLG-8) is
// lost at a resume, and shows here. Cost: 2 trainings, the second shorter; the first writes a
// checkpoint at the middle step.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "verify/verify.h"
#include "verify/verify_child.h"

namespace tp::cli::verify {

CheckResult check_resume(VerifyContext& context) {
  const int64_t steps = std::max<int64_t>(2, context.steps());
  const int64_t stop = steps / 2;
  CheckResult row("resume", "bitwise (run.deterministic)");
  const std::filesystem::path dir = context.check_dir("resume");
  std::vector<std::string> sets{"train.max_steps=" + std::to_string(steps), "run.deterministic=true",
                                "checkpoint.strategy=\"steps\"", "checkpoint.every=" + std::to_string(stop),
                                "checkpoint.keep_last=" + std::to_string(steps)};
  // The schedule's state is part of what must resume, so it stays; a warmup longer than the
  // short run is cut to the run (the schedule refuses a warmup beyond the last step).
  if (context.config().schedule.warmup_steps > steps) sets.push_back("schedule.warmup_steps=" + std::to_string(steps));
  // Warm-up and cool-down counted in epochs do not fit a run of a few steps (refused): the short
  // run warms up over its own steps instead, so a warm-up is still part of the resumed state.
  const SchedulerOptions& schedule = context.config().schedule;
  if (schedule.warmup_epochs > 0 || schedule.cooldown_epochs > 0 || schedule.warmup_lr > 0 || !schedule.warmup_prefix) {
    for (std::string& set : epoch_warmup_reset_sets()) sets.push_back(std::move(set));
    if (schedule.warmup_epochs > 0 && schedule.interval == "step")
      sets.push_back("schedule.warmup_steps=" + std::to_string(stop));
  }
  const ChildRunner runner(context.options());
  const ChildResult straight = runner.train(dir / "straight", sets);
  if (!straight.ok()) {
    row.status = Status::kFail;
    row.reason = straight.failure();
    return row;
  }
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld.pt", static_cast<long long>(stop)); // CheckpointManager's names
  const std::filesystem::path middle = straight.dir / "checkpoints" / name;
  const ChildResult resumed = runner.train(dir / "resumed", sets, 1, middle);
  if (!resumed.ok()) {
    row.status = Status::kFail;
    row.reason = resumed.failure();
    return row;
  }
  const LoadedCheckpoint a = load_checkpoint(straight.dir / "checkpoints" / "last.pt");
  const LoadedCheckpoint b = load_checkpoint(resumed.dir / "checkpoints" / "last.pt");
  const WeightDifference difference = compare_weights(a.model, b.model);
  row.measured = std::to_string(difference.differing) + " of " + std::to_string(difference.tensors) + " tensors differ";
  const std::string what = std::to_string(steps) + " steps straight against stopping after step " +
                           std::to_string(stop) + " and resuming from " + name;
  if (difference.differing == 0 && a.step == b.step) {
    row.reason = what + ": the final weights are bit-identical";
    return row;
  }
  row.status = Status::kFail;
  row.reason = what + ": " + (a.step != b.step ? "the resumed run ended at step " + std::to_string(b.step) + ", not " +
                                                    std::to_string(a.step)
                                              : "max relative difference " + format_value(difference.relative) +
                                                    " at '" + difference.worst + "'");
  row.notes.emplace_back("a resumed run restores only what the checkpoint holds: state a model or loss keeps outside "
                      "visit_state (a counter, a cache), randomness outside the host's generators (PLG-8), or a "
                      "dataset that depends on more than config, split, index and ctx->seed is lost");
  return row;
}

}  // namespace tp::cli::verify
