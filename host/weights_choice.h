// Which weights of a checkpoint `host eval`, `predict` and `export` use: --weights when given,
// else the weights the run's checkpoint.monitor measured (LoadedCheckpoint::monitored_weights):
// a run that monitored val_ema/accuracy chose best.pt by its EMA weights, and scoring the live
// weights of that file reported a model the run never judged (issue 58, item 17).
#pragma once

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

namespace tp::cli {

/// The weights chosen and, when the default chose an average, the console line that says so.
struct ChosenWeights {
  std::string name; ///< "live", "ema" or "swa": LoadedCheckpoint::weights() takes it
  std::string note; ///< "" unless the default chose an average
};

/// `option` is --weights ("" when not given). Given, it is taken as it is (weights() refuses a
/// name the file does not hold, exit 2).
ChosenWeights choose_weights(const std::string& option, const LoadedCheckpoint& checkpoint);

}  // namespace tp::cli
