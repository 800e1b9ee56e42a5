#include "tp/framework/dist/rendezvous.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "tp/framework/error.h"

namespace tp {
namespace {

using Env = std::map<std::string, std::string>;

const std::string kHint =
    " Launch with `host --nproc-per-node N train ...`, `torchrun --nproc-per-node=N --no-python host ...` "
    "or srun, which set these variables consistently, or unset them all for a single process "
    "(docs/distributed.md).";

std::optional<std::string> get(const Env& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

int as_int(const std::string& name, const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw ConfigError("", "environment variable " + name + "=\"" + text + "\" is not an integer." + kHint);
  return value;
}

// SLURM's job and step ids exceed int (the batch step is 4294967294).
std::optional<long long> get_id(const Env& env, const std::string& name) {
  const auto text = get(env, name);
  if (!text) return std::nullopt;
  long long value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value < 0)
    throw ConfigError("", "environment variable " + name + "=\"" + *text + "\" is not a SLURM id (a number)." + kHint);
  return value;
}

std::optional<int> get_int(const Env& env, const std::string& name) {
  const auto text = get(env, name);
  if (!text) return std::nullopt;
  return as_int(name, *text);
}

int require_int(const Env& env, const std::string& name, const std::string& because) {
  const auto value = get_int(env, name);
  if (!value) throw ConfigError("", "environment variable " + name + " is not set, but " + because + "." + kHint);
  return *value;
}

// The count of this node in a SLURM tasks-per-node list, "2(x3),1" = 2, 2, 2, 1 for nodes
// 0-3; 0 when the text is not such a list or has no entry for `node`.
int tasks_on_node(const std::string& text, long long node) {
  long long first = 0; // the first node of the current item
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    int count = 0;
    long long repeat = 1;
    const auto [count_end, count_error] = std::from_chars(item.data(), item.data() + item.size(), count);
    if (count_error != std::errc() || count < 1) return 0;
    const std::string rest(count_end, item.data() + item.size());
    if (!rest.empty()) {
      const auto [repeat_end, repeat_error] = std::from_chars(rest.data() + std::min<std::size_t>(2, rest.size()),
                                                              rest.data() + rest.size(), repeat);
      if (rest.rfind("(x", 0) != 0 || repeat_error != std::errc() || repeat < 1 ||
          std::string(repeat_end, rest.data() + rest.size()) != ")")
        return 0;
    }
    if (node < first + repeat) return count;
    first += repeat;
    at = end + 1;
  }
  return 0;
}

// Tasks on this node, for the thread split: SLURM_NTASKS_PER_NODE (set only with
// --ntasks-per-node), else the step's or the job's list (`srun -n 2` sets only these,
// "2(x3),1" for uneven layouts) at SLURM_NODEID. Without any, one task per node.
int slurm_tasks_per_node(const Env& env) {
  const auto plain = get(env, "SLURM_NTASKS_PER_NODE");
  if (plain && plain->find_first_not_of("0123456789") == std::string::npos)
    return as_int("SLURM_NTASKS_PER_NODE", *plain);
  const long long node = get_id(env, "SLURM_NODEID").value_or(0);
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
    if (const auto list = get(env, name))
      if (const int count = tasks_on_node(*list, node); count > 0) return count;
  return 1;
}

void check(const Rendezvous& r) {
  const std::string where = " (from " + r.source + " variables)";
  if (r.world_size < 1)
    throw ConfigError("", "WORLD_SIZE=" + std::to_string(r.world_size) + " must be >= 1" + where + "." + kHint);
  if (r.rank < 0 || r.rank >= r.world_size)
    throw ConfigError("", "RANK=" + std::to_string(r.rank) + " is outside [0, WORLD_SIZE=" +
                              std::to_string(r.world_size) + ")" + where + "." + kHint);
  if (r.local_world_size < 1 || r.local_world_size > r.world_size)
    throw ConfigError("", "LOCAL_WORLD_SIZE=" + std::to_string(r.local_world_size) + " must be in [1, WORLD_SIZE=" +
                              std::to_string(r.world_size) + "]" + where + "." + kHint);
  if (r.local_rank < 0 || r.local_rank >= r.local_world_size)
    throw ConfigError("", "LOCAL_RANK=" + std::to_string(r.local_rank) + " is outside [0, LOCAL_WORLD_SIZE=" +
                              std::to_string(r.local_world_size) + ")" + where + "." + kHint);
  if (r.world_size > 1 && r.master_addr.empty())
    throw ConfigError("", "MASTER_ADDR is not set, but WORLD_SIZE=" + std::to_string(r.world_size) +
                              " needs the address of rank 0's node" + where + "." + kHint);
  if (r.world_size > 1 && (r.master_port < 1 || r.master_port > 65535))
    throw ConfigError("", "MASTER_PORT=" + std::to_string(r.master_port) + " is not a TCP port (1-65535)" + where +
                              "." + kHint);
}

}  // namespace

int slurm_derived_port(long long job_id, long long step_id) {
  constexpr long long kBase = 20000;
  constexpr long long kSpan = 20000;
  constexpr long long kStepStride = 7919; // prime, so coprime to kSpan
  return static_cast<int>(kBase + (job_id % kSpan + (step_id % kSpan) * kStepStride) % kSpan);
}

Rendezvous read_rendezvous(const Env& env) {
  Rendezvous r;
  const bool torchrun = get(env, "RANK") || get(env, "WORLD_SIZE");
  const auto slurm_tasks = get_int(env, "SLURM_NTASKS");
  if (torchrun) {
    r.source = "torchrun";
    r.world_size = require_int(env, "WORLD_SIZE", "RANK is");
    r.rank = require_int(env, "RANK", "WORLD_SIZE is");
    // Single-node launchers that set only RANK/WORLD_SIZE: every rank is local.
    r.local_world_size = get_int(env, "LOCAL_WORLD_SIZE").value_or(r.world_size);
    r.local_rank = get_int(env, "LOCAL_RANK").value_or(r.rank % r.local_world_size);
    if (r.world_size > 1) {
      r.master_addr = get(env, "MASTER_ADDR").value_or("");
      r.master_port = require_int(env, "MASTER_PORT", "WORLD_SIZE > 1 needs the rendezvous port");
    } else if (get(env, "MASTER_ADDR") && get(env, "MASTER_PORT")) {
      // torchrun --nproc-per-node 1 (and our launcher) still give an address: join a group of one.
      r.master_addr = *get(env, "MASTER_ADDR");
      r.master_port = require_int(env, "MASTER_PORT", "MASTER_ADDR is");
    }
    r.agent_store = get(env, "TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    // Only torchrun's own id: SLURM ids here could differ between nodes whose launchers were
    // started by separate sruns and are meant to meet.
    if (const auto id = get(env, "TORCHELASTIC_RUN_ID")) r.run_id = "torchrun run " + *id;
    // The built-in launcher's own (host/launcher.cpp), used as torchrun's is.
    else if (const auto launch = get(env, "TORCHHOST_LAUNCH_ID")) r.run_id = "host launch " + *launch;
  } else if (slurm_tasks && *slurm_tasks > 1) {
    r.source = "slurm";
    r.world_size = *slurm_tasks;
    r.rank = require_int(env, "SLURM_PROCID", "SLURM_NTASKS > 1 is");
    r.local_rank = get_int(env, "SLURM_LOCALID").value_or(0);
    r.local_world_size = std::max(slurm_tasks_per_node(env), r.local_rank + 1);
    // Rank 0 runs on the node srun was launched from in a batch job; MASTER_ADDR overrides.
    r.master_addr = get(env, "MASTER_ADDR").value_or(get(env, "SLURM_LAUNCH_NODE_IPADDR").value_or(""));
    // A port derived from the job and step ids keeps the steps of one job on one node apart;
    // MASTER_PORT overrides. The identity separates whatever still meets at one port.
    const auto job = get_id(env, "SLURM_JOB_ID");
    const auto step = get_id(env, "SLURM_STEP_ID");
    r.master_port = get_int(env, "MASTER_PORT").value_or(slurm_derived_port(job.value_or(0), step.value_or(0)));
    if (job) r.run_id = "slurm job " + std::to_string(*job) + " step " + std::to_string(step.value_or(0));
  } else {
    return r;
  }
  check(r);
  return r;
}

}  // namespace tp
