// One pass of the model over an evaluation split: the loss and every metric summed over the
// split and then over the ranks (ARCH-8), computed once at the end (ARCH-11). The run's own
// evaluations (Evaluator) and `host eval`'s (evaluate_checkpoint) are this one function, so that
// an evaluated checkpoint reports the numbers its run logged for the same weights and batches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/scalars.h"

namespace tp {

class Collectives;

/// What one pass reads; every reference must outlive the call.
struct EvaluationPass {
  RunComponents& parts;                              ///< the model, the loss and the metrics
  const std::vector<ComponentConfig>& metric_tables; ///< [[metrics]] in parts.metrics' order: the key a failure names
  const BatchPlacement& placement;                   ///< the batches' way to the model's device
  DataLoader& loader;                                ///< the split, every sample once over the ranks (kEvalExact)
  int64_t batch_limit;                               ///< > 0: at most that many batches (overfit_batches, fast_dev_run)
  Collectives& collectives;                          ///< the sums over ranks; the identity for a single process
  std::string phase = {};                            ///< what a failure says ran: "" = "the evaluation '<prefix>'"
  /// Inference mode (the cheapest); false: autograd off only (c10::NoGradGuard), for a pass
  /// before training, where a tensor a plugin makes and keeps on its first call must be a normal
  /// one that training's autograd may save (an inference tensor cannot be).
  bool inference_mode = true;
  /// Training's evaluations: this rank's reasons to abandon the pass (RunControl::evaluation_stop_flags:
  /// a stop signal's bit, or another rank's note of one), read before each batch. A rank that sees one stops
  /// fetching batches; the ranks agree in the pass's header all-reduce (one per pass, never one per
  /// batch), and `*stopped` receives the flags ORed over ranks. Empty (host
  /// eval, the sanity check): the pass always runs to its end.
  std::function<uint32_t()> stop_flags = {};
  uint32_t* stopped = nullptr; ///< required with stop_flags: 0 when the pass ran to its end
};

/// [all ranks] Evaluates the model as it is (its weights, its dtype) on `pass.loader`'s split, in
/// inference mode and without autocast: "<prefix>/loss", then "<prefix>/loss/<term>" for a loss that reports
/// named terms, then "<prefix>/<metric>" in config order, then "<prefix>/skipped_samples" when
/// data.on_bad_sample = "skip" dropped samples (over all ranks): the values cover the others. Data-parallel: sums over the disjoint
/// shards, so every rank returns the single-process values; metrics' rows that do not add up
/// (ABI 1.7) are gathered. Leaves the model in evaluation mode. A failing plugin call throws
/// PluginError naming the component, the evaluation, the batch and its fields (batch_error.h).
/// Cost: two device syncs, at the end. Abandoned on every rank (pass.stop_flags, `*pass.stopped`
/// != 0): returns nothing, every metric's state left as it was, nothing gathered.
Scalars evaluate_split(const EvaluationPass& pass, const std::string& prefix);

}  // namespace tp
