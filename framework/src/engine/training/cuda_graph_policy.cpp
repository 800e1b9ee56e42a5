#include "engine/training/cuda_graph_policy.h"

#include "tp/framework/error.h"

namespace tp {

std::vector<CudaGraphRefusal> cuda_graph_refusals(const CudaGraphFacts& f) {
  std::vector<CudaGraphRefusal> out;
  if (!f.cuda_build)
    out.push_back({"run.device", "this host is built against a CPU LibTorch, which has no CUDA graphs; build it "
                                 "against a CUDA PyTorch (README, \"On a GPU machine\")"});
  else if (!f.cuda_device)
    out.push_back({"run.device", "the run trains on the CPU; CUDA graphs replay work on a CUDA device (run.device = "
                                 "\"cuda\")"});
  if (f.world_size > 1)
    out.push_back({"run.cuda_graphs",
                   "the run has " + std::to_string(f.world_size) +
                       " processes; a data-parallel step agrees with the other ranks on the host every step (stop, "
                       "save and skip flags ride with its item count), which a captured graph cannot, so graphed "
                       "steps are single-process for now"});
  if (!f.device_step_optimizer)
    out.push_back({f.optimizer_has_fused_kernel ? "optim.implementation" : "optim.name",
                   "optimizer " + f.optimizer +
                       (f.optimizer_has_fused_kernel ? " runs its per-parameter loop" : " has no fused kernel") +
                       ", whose lr, step count and fp16 skip are host values a graph would bake in (torch::optim::Adam "
                       "replays the captured step's bias correction forever); graphs need the fused sgd, adam or adamw "
                       "(optim.implementation = \"fused\" or \"auto\")"});
  if (f.nan_policy == NanPolicy::kSkip)
    out.push_back({"train.nan_policy", "train.nan_policy = \"skip\" reads every step's loss on the host to decide "
                                       "the update; use \"stop\" (the loss is then checked at logging steps)"});
  if (f.on_oom == OomPolicy::kSplit)
    out.push_back({"train.on_oom", "train.on_oom = \"split\" cuts micro-batches into new shapes after running out of "
                                   "memory, and a graph replays one shape; use \"fail\""});
  if (f.activation_checkpointing)
    out.push_back({"model.activation_checkpointing",
                   "activation checkpointing recomputes blocks in backward, restoring the CUDA random state on "
                   "the host, which a replay skips; turn it off"});
  if (!f.model_blocker.empty())
    out.push_back({"run.cuda_graphs", "model " + f.model_id + " declares that it cannot be captured: " + f.model_blocker});
  if (!f.variable_fields.empty())
    out.push_back({"run.cuda_graphs", "dataset " + f.dataset_id + " gives variable-size fields (" + f.variable_fields +
                                          "), so batches change shape and a graph replays one shape"});
  if (f.cycles_momentum)
    out.push_back({"schedule.cycle_momentum",
                   "the one_cycle schedule cycles momentum (or Adam's beta1) every step, and the fused kernels take "
                   "it as a host value a graph would bake in; set schedule.cycle_momentum = false"});
  return out;
}

std::string describe_refusals(const std::vector<CudaGraphRefusal>& refusals) {
  std::string out;
  for (std::size_t i = 0; i < refusals.size(); ++i)
    out += (refusals.size() > 1 ? (i ? "; (" : "(") + std::to_string(i + 1) + ") " : std::string()) +
           refusals[i].reason + " [" + refusals[i].key + "]";
  return out;
}

bool cuda_graphs_allowed(CudaGraphMode mode, const CudaGraphFacts& facts) {
  if (mode == CudaGraphMode::kOff) return false;
  const std::vector<CudaGraphRefusal> refusals = cuda_graph_refusals(facts);
  if (refusals.empty()) return true;
  if (mode == CudaGraphMode::kAuto) return false;
  // Every reason at once, each with its key, so one edit of the config is enough.
  throw ConfigError(refusals.front().key,
                    "run.cuda_graphs = \"on\" cannot capture this run's training step: " + describe_refusals(refusals) +
                        ". Change the key in brackets, or set run.cuda_graphs = \"auto\" (graphs where they apply, "
                        "eager otherwise) or \"off\"; docs/cuda_graphs.md lists what is supported.");
}

}  // namespace tp
