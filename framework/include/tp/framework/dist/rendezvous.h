// Where this process sits in a data-parallel job, read from the environment the launcher set:
// torchrun's contract (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// which `host --nproc-per-node` also sets, or SLURM's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID)
// when the torchrun variables are absent. Torch-free: pure parsing, no sockets, so the session can
// read it before anything else (the logger needs the rank).
#pragma once

#include <map>
#include <string>

namespace tp {

/// One process's place in the job. A process a launcher started (torchrun, `host
/// --nproc-per-node`, SLURM) joins a process group even when it is alone, as
/// torch.distributed.init_process_group does, so `--nproc-per-node 1` runs the real collective
/// path (NCCL on one GPU); a process started without launcher variables runs as a plain single
/// process with no process group.
struct Rendezvous {
  int rank = 0;             ///< global rank, 0 <= rank < world_size
  int world_size = 1;       ///< number of processes in the job
  int local_rank = 0;       ///< rank on this node; picks the GPU (cuda:local_rank)
  int local_world_size = 1; ///< processes on this node
  std::string master_addr;  ///< host of the rendezvous store (rank 0's node)
  int master_port = 0;      ///< its TCP port
  /// torchrun's agent already serves the store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE):
  /// rank 0 must connect as a client instead of binding the port ("address already in use").
  bool agent_store = false;
  std::string source = "none"; ///< "torchrun" (the variables above), "slurm" or "none"
  /// Which run this process belongs to, the same on every rank of it and different between runs
  /// that could meet at one store: "slurm job J step S" (SLURM_JOB_ID, SLURM_STEP_ID),
  /// "torchrun run ID" (TORCHELASTIC_RUN_ID), "host launch ID" (TORCHHOST_LAUNCH_ID: the built-in
  /// launcher's, fresh for each single-node launch), or "" when the launcher names none (hand-set
  /// variables, a multi-node launch without an exported TORCHHOST_LAUNCH_ID: the port is then the
  /// only separation). Part of the store's key prefix, and checked when a rank joins
  /// (check_run_identity), so a rank that reaches another run's store fails instead of joining.
  std::string run_id;

  /// True when this process must join a process group: several processes, or one that a
  /// launcher started with a rendezvous address (world size 1 under torchrun).
  bool distributed() const noexcept { return world_size > 1 || (source == "torchrun" && master_port > 0); }
};

/// Reads the rendezvous variables from `env` (tp::process_environment()). Without RANK,
/// WORLD_SIZE and a multi-task SLURM step, returns the single-process default.
/// Throws ConfigError (exit 2) naming the variable when one is missing, not an integer, out of
/// range or contradicts another (RANK >= WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE, ...).
///
/// Example:
///   const Rendezvous place = read_rendezvous(process_environment());
///   if (place.distributed()) ... join the process group ...
Rendezvous read_rendezvous(const std::map<std::string, std::string>& env);

/// The rendezvous port of a SLURM step when MASTER_PORT is not set: 20000 + (job_id + 7919 x
/// step_id) % 20000. Two steps of one job on one node (`srun ... &` twice in an allocation) get
/// different ports (7919 is prime to 20000, so steps 0..19999 of a job never share one); two
/// jobs may still meet at one port, which check_run_identity then refuses.
int slurm_derived_port(long long job_id, long long step_id);

}  // namespace tp
