// The launcher contract: torchrun's variables, SLURM's fallback, and clear errors (exit 2) for
// missing or contradictory values; and the failure messages ranks pass through the store.
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/rendezvous.h"
#include "tp/framework/error.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <doctest/doctest.h>

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
