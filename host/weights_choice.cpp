#include "weights_choice.h"

namespace tp::cli {

ChosenWeights choose_weights(const std::string& option, const LoadedCheckpoint& checkpoint) {
  if (!option.empty()) return {option, ""};
  ChosenWeights chosen{checkpoint.monitored_weights(), ""};
  if (chosen.name != "live")
    chosen.note = "weights: " + chosen.name + ", the ones the run's checkpoint.monitor (" + checkpoint.monitor +
                  ") measured; --weights live for the trained weights";
  return chosen;
}

}  // namespace tp::cli
