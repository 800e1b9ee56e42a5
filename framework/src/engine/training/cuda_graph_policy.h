// run.cuda_graphs (docs/cuda_graphs.md): whether this run may capture its training step in a CUDA
// graph, decided once at start-up from facts about the run. A run that cannot is refused with the
// reason and the key to change under "on" (exit 2, ConfigError) and trains eagerly under "auto".
// Pure: the facts are gathered by the trainer, so every refusal is tested without a GPU.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/config/choices.h" // CudaGraphMode, NanPolicy, OomPolicy

namespace tp {

/// What the decision reads about the run.
struct CudaGraphFacts {
  bool cuda_device = false;        ///< the run trains on a CUDA device
  bool cuda_build = false;         ///< LibTorch was built with CUDA (TP_TORCH_DEVICE_BUILD == 2)
  int world_size = 1;              ///< processes in the run
  std::string optimizer;           ///< optim.name
  bool optimizer_has_fused_kernel = true; ///< LibTorch has a fused kernel for optim.name (has_fused_kernel)
  bool device_step_optimizer = false; ///< the built optimizer updates on the device (fused sgd/adam/adamw)
  NanPolicy nan_policy = NanPolicy::kStop; ///< train.nan_policy
  OomPolicy on_oom = OomPolicy::kFail;     ///< train.on_oom
  bool activation_checkpointing = false; ///< [model] activation_checkpointing
  std::string model_id;            ///< the model component, for messages
  std::string model_blocker;       ///< the model's reason it cannot be captured (ABI 1.8); "" = capturable
  std::string dataset_id;          ///< the training dataset component, for messages
  std::string variable_fields;     ///< the training batches' pad/ragged fields (BatchLayout::describe); "" = none
  bool cycles_momentum = false;    ///< the schedule changes momentum/beta1 every step (one_cycle, cycle_momentum)
};

/// Why a run cannot capture its step: the explanation and the key whose change lifts it.
struct CudaGraphRefusal {
  std::string key;
  std::string reason;
};

/// Every reason `facts` rule capture out, in a fixed order (empty: capture is possible).
std::vector<CudaGraphRefusal> cuda_graph_refusals(const CudaGraphFacts& facts);

/// `refusals` as one line: "(1) reason [key]; (2) ..." (no numbers for a single one).
std::string describe_refusals(const std::vector<CudaGraphRefusal>& refusals);

/// Under `mode`: kOn with a refusal throws ConfigError for the first one (its key, the reason and
/// what to do); otherwise returns whether the run captures (kOff: never; kAuto: when nothing
/// refuses, and the timed warm-up then decides).
bool cuda_graphs_allowed(CudaGraphMode mode, const CudaGraphFacts& facts);

}  // namespace tp
