// The launcher contract: torchrun's variables, SLURM's fallback, and clear errors (exit 2) for
// missing or contradictory values; and the failure messages ranks pass through the store.
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/rendezvous.h"
#include "tp/framework/error.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <doctest/doctest.h>

#include <set>

using Env = std::map<std::string, std::string>;

namespace {

std::string error_of(const Env& env) {
  try {
    tp::read_rendezvous(env);
  } catch (const tp::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("no launcher variables: a single process") {
  const auto r = tp::read_rendezvous({{"HOME", "/root"}, {"SLURM_NTASKS", "1"}});
  CHECK_FALSE(r.distributed());
  CHECK(r.source == "none");
}

TEST_CASE("a launcher-started process of world size 1 joins a group of one; a bare WORLD_SIZE=1 does not") {
  const auto launched = tp::read_rendezvous(
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  CHECK(launched.distributed());
  CHECK(launched.master_port == 29500);
  const auto bare = tp::read_rendezvous({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  CHECK_FALSE(bare.distributed());
}

TEST_CASE("torchrun variables") {
  const auto r = tp::read_rendezvous({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                                      {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
                                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  CHECK(r.distributed());
  CHECK(r.rank == 3);
  CHECK(r.local_rank == 1);
  CHECK(r.local_world_size == 2);
  CHECK(r.master_addr == "10.0.0.1");
  CHECK(r.master_port == 29500);
  CHECK(r.agent_store);
}

TEST_CASE("SLURM variables when torchrun's are absent") {
  const auto r = tp::read_rendezvous({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                      {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"},
                                      {"SLURM_JOB_ID", "123456"}});
  CHECK(r.source == "slurm");
  CHECK(r.rank == 5);
  CHECK(r.world_size == 8);
  CHECK(r.local_rank == 1);
  CHECK(r.local_world_size == 4);
  CHECK(r.master_addr == "10.1.2.3");
  CHECK(r.master_port == 20000 + 123456 % 20000);
}

TEST_CASE("missing or contradictory variables are configuration errors naming the variable") {
  CHECK(error_of({{"RANK", "0"}}).find("WORLD_SIZE is not set") != std::string::npos);
  CHECK(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
            .find("RANK=2 is outside [0, WORLD_SIZE=2)") != std::string::npos);
  CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}).find("MASTER_ADDR is not set") !=
        std::string::npos);
  CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}).find("MASTER_PORT is not set") !=
        std::string::npos);
  CHECK(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK=\"x\" is not an integer") != std::string::npos);
  CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
            .find("LOCAL_RANK=2") != std::string::npos);
}

TEST_CASE("a failure message the store cannot hand over becomes a sentence, not an exception") {
  // first_failure reads the failing rank's message from the store between two collectives; had
  // the read thrown, this rank would have left before the second, and the others would have
  // reported it as lost (the last review's open finding).
  c10d::HashStore store;
  store.setTimeout(std::chrono::milliseconds(50));
  const std::string said = "out of disk space writing the checkpoint";
  store.set("failure/0/1", std::vector<uint8_t>(said.begin(), said.end()));
  CHECK(tp::read_failure_message(store, "failure/0/1") == said);
  const std::string unread = tp::read_failure_message(store, "failure/0/2");
  CHECK(unread.find("its message could not be read from the rendezvous store") != std::string::npos);
  CHECK(unread.find("its own output says what failed") != std::string::npos);
}

TEST_CASE("two SLURM steps of one job get different ports and different run identities (cluster trial F3)") {
  const Env step0{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"},
                  {"SLURM_JOB_ID", "7300"}, {"SLURM_STEP_ID", "0"}};
  Env step1 = step0;
  step1["SLURM_STEP_ID"] = "1";
  const auto a = tp::read_rendezvous(step0);
  const auto b = tp::read_rendezvous(step1);
  CHECK(a.master_port == 20000 + 7300);
  CHECK(b.master_port == 20000 + (7300 + 7919) % 20000);
  CHECK(a.run_id == "slurm job 7300 step 0");
  CHECK(b.run_id == "slurm job 7300 step 1");
  // Every step of one job has its own port, and the batch step's id (beyond int) parses.
  std::set<int> ports;
  for (long long step = 0; step < 20000; ++step) ports.insert(tp::slurm_derived_port(7300, step));
  CHECK(ports.size() == 20000);
  CHECK(tp::slurm_derived_port(7300, 4294967294LL) >= 20000);
  CHECK(tp::slurm_derived_port(7300, 4294967294LL) < 40000);
  // MASTER_PORT still wins; the identity stays.
  step1["MASTER_PORT"] = "29999";
  CHECK(tp::read_rendezvous(step1).master_port == 29999);
  CHECK(tp::read_rendezvous(step1).run_id == "slurm job 7300 step 1");
}

TEST_CASE("torchrun's run id is the identity; hand-set variables have none") {
  Env env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"},
          {"SLURM_JOB_ID", "5"}};
  CHECK(tp::read_rendezvous(env).run_id.empty());
  env["TORCHELASTIC_RUN_ID"] = "abc";
  CHECK(tp::read_rendezvous(env).run_id == "torchrun run abc");
  // The built-in launcher's own identity, used as torchrun's is.
  env.erase("TORCHELASTIC_RUN_ID");
  env["TORCHHOST_LAUNCH_ID"] = "4242-00ff";
  CHECK(tp::read_rendezvous(env).run_id == "host launch 4242-00ff");
}

TEST_CASE("a rank that reaches another run's store fails naming both runs instead of joining") {
  c10d::HashStore store;
  tp::Rendezvous owner;
  owner.world_size = 2;
  owner.master_addr = "127.0.0.1";
  owner.master_port = 27300;
  owner.run_id = "slurm job 7300 step 0";
  tp::Rendezvous own = owner;
  own.rank = 1;
  tp::Rendezvous foreign = own;
  foreign.run_id = "slurm job 7300 step 1";
  const auto timeout = std::chrono::milliseconds(100);

  // Nobody recorded a run yet: a bounded wait, then a sentence.
  std::string said;
  try {
    tp::check_run_identity(store, own, timeout);
  } catch (const tp::Error& e) {
    said = e.what();
  }
  CHECK(said.find("no rank 0 recorded its run there") != std::string::npos);

  tp::check_run_identity(store, owner, timeout);
  CHECK_NOTHROW(tp::check_run_identity(store, own, timeout));
  said.clear();
  try {
    tp::check_run_identity(store, foreign, timeout);
  } catch (const tp::Error& e) {
    said = e.what();
  }
  CHECK(said.find("rank 1 of slurm job 7300 step 1") != std::string::npos);
  CHECK(said.find("of another run (slurm job 7300 step 0)") != std::string::npos);
  CHECK(said.find("MASTER_PORT") != std::string::npos);
}

TEST_CASE("srun without --ntasks-per-node: the tasks on this node come from SLURM's lists (cluster trial F11)") {
  Env env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"},
          {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}};
  CHECK(tp::read_rendezvous(env).local_world_size == 2); // node 0 by default
  env["SLURM_NODEID"] = "3";
  CHECK(tp::read_rendezvous(env).local_world_size == 1);
  env["SLURM_STEP_TASKS_PER_NODE"] = "3,3(x3)"; // the step's layout wins over the job's
  CHECK(tp::read_rendezvous(env).local_world_size == 3);
  env["SLURM_NTASKS_PER_NODE"] = "4";
  CHECK(tp::read_rendezvous(env).local_world_size == 4);
  env.erase("SLURM_NTASKS_PER_NODE");
  env["SLURM_STEP_TASKS_PER_NODE"] = "garbage";
  CHECK(tp::read_rendezvous(env).local_world_size == 1); // the job's list, node 3
  env["SLURM_TASKS_PER_NODE"] = "2(x";
  CHECK(tp::read_rendezvous(env).local_world_size == 1); // unreadable: one task per node
}

TEST_CASE("an unresolvable MASTER_ADDR is a configuration error naming it (cluster trial F10)") {
  tp::Rendezvous place;
  place.world_size = 2;
  place.source = "torchrun";
  place.master_port = 29500;
  place.master_addr = "nosuchhost.invalid";
  std::string said;
  try {
    tp::check_master_addr_resolves(place);
  } catch (const tp::ConfigError& e) {
    said = e.what();
  }
  CHECK(said.find("MASTER_ADDR = \"nosuchhost.invalid\"") != std::string::npos);
  CHECK(said.find("does not resolve") != std::string::npos);
  place.master_addr = "127.0.0.1";
  CHECK_NOTHROW(tp::check_master_addr_resolves(place));
  place.master_addr = "localhost";
  CHECK_NOTHROW(tp::check_master_addr_resolves(place));
}
