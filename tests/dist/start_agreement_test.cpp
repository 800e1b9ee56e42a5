// What the ranks agree on before their first collective that depends on it: the resolved
// configuration (cluster trial F2) and the start, fresh or resumed (F4). Plain ranks from
// environment variables, no launcher: the launcher would stop one rank itself once the other
// failed, and the point is what each rank says and returns on its own.
#include <filesystem>
#include <string>

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

/// Shell that runs ranks 0 and 1 of `host train` with `args0` / `args1` (each in its own working
/// directory `cwd0` / `cwd1`), logs in `dir`/rank<N>.log, then prints "exits C0 C1 after S s" and
/// both logs. `port_offset` keeps the tests of one shell apart.
std::string two_ranks(const std::filesystem::path& dir, const std::filesystem::path& cwd0, const std::string& args0,
                      const std::filesystem::path& cwd1, const std::string& args1, int port_offset) {
  const std::string host = std::string("'") + tp::test::build_dir() + "/bin/host'";
  const auto log = [&](int rank) { return "'" + (dir / ("rank" + std::to_string(rank) + ".log")).string() + "'"; };
  return "export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + ($$ + " + std::to_string(port_offset) +
         ") % 20000)) WORLD_SIZE=2; START=$(date +%s); "
         "(cd '" + cwd0.string() + "' && RANK=0 LOCAL_RANK=0 exec timeout -s KILL 120 " + host + args0 + ") > " + log(0) +
         " 2>&1 & P0=$!; "
         "(cd '" + cwd1.string() + "' && RANK=1 LOCAL_RANK=1 exec timeout -s KILL 120 " + host + args1 + ") > " + log(1) +
         " 2>&1 & P1=$!; "
         "wait $P0; C0=$?; wait $P1; C1=$?; echo \"exits $C0 $C1 after $(( $(date +%s) - START )) s\"; "
         "echo '--- rank 0:'; cat " + log(0) + "; echo '--- rank 1:'; cat " + log(1);
}

int seconds_after(const std::string& output) {
  const auto at = output.find(" after ");
  return at == std::string::npos ? -1 : std::stoi(output.substr(at + 7));
}

/// tests/dist/ddp.toml, which every case runs.
std::string ddp_config() { return std::string(tp::test::source_dir()) + "/tests/dist/ddp.toml"; }

/// The small data set the cases with an earlier run train on: 96 samples in batches of 16.
const std::string kSmall = " --set data.train.size=96 --set data.train.val_size=32 --set train.batch_size=16";

/// The earlier run those cases resume or evaluate: one process trains kSmall for one epoch, from
/// `cwd`, into `output_dir` (as --output-dir gives it: relative to `cwd`, or absolute).
void train_earlier_run(const std::filesystem::path& cwd, const std::string& output_dir) {
  const std::string host = std::string("'") + tp::test::build_dir() + "/bin/host'";
  const auto first = tp::test::run_shell("cd '" + cwd.string() + "' && " + host + " train --config '" + ddp_config() +
                                         "' --output-dir '" + output_dir + "' --set train.epochs=1" + kSmall);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
}

}  // namespace

TEST_CASE("ranks started with different configurations stop at once with exit 2, naming the first key") {
  // Before, rank 1 stepped with lr 0.5 and seed 99 beside rank 0's 0.01 and 7, and both exited 0.
  const auto dir = tp::test::fresh_dir("ddp_mixed_config");
  const std::string args = " train --config '" + ddp_config() + "' --output-dir '" + dir.string() +
                           "' --set train.epochs=1 --set dist.timeout_s=30";
  const auto run = tp::test::run_shell(
      two_ranks(dir, dir, args, dir, args + " --set optim.lr=0.5 --set run.seed=99", 41));
  INFO(run.output);
  CHECK(run.output.find("exits 2 2 ") != std::string::npos);
  CHECK(seconds_after(run.output) < 30);
  // Both ranks say which key differs and both values, in rank 0's order.
  const std::string said = "the resolved configuration differs from rank 0's: optim.lr: 0.05 -> 0.5 (rank 0's value -> "
                           "rank 1's; 2 keys differ)";
  const auto first = run.output.find(said);
  REQUIRE(first != std::string::npos);
  CHECK(run.output.find(said, first + 1) != std::string::npos);
  CHECK(run.output.find("rank 1: " + said) != std::string::npos); // rank 0 names the rank
  CHECK(!std::filesystem::exists(dir / "checkpoints" / "last.pt"));
}

TEST_CASE("--resume auto with the run directory not shared: every rank stops at once, naming the shared file system") {
  // Rank 1 runs in another working directory, as on a node without the shared file system: it
  // finds no checkpoint and starts fresh while rank 0 resumes. Before, the ranks entered different
  // collectives and failed after dist.timeout_s, rank 0 in "broadcast rank 0's parameters and
  // buffers", rank 1 in "agree on the run's record and tracking"; check_same_position was never reached.
  const auto dir = tp::test::fresh_dir("ddp_resume_not_shared");
  const auto node1 = dir / "node1";
  std::filesystem::create_directories(node1);
  train_earlier_run(dir, "run");
  REQUIRE(std::filesystem::exists(dir / "run" / "checkpoints" / "last.pt"));
  const std::string args = " train --config '" + ddp_config() + "' --output-dir run --set train.epochs=2" + kSmall +
                           " --set dist.timeout_s=30 --resume auto";
  const auto run = tp::test::run_shell(two_ranks(dir, dir, args, node1, args, 43));
  INFO(run.output);
  CHECK(run.output.find("exits 2 2 ") != std::string::npos);
  CHECK(seconds_after(run.output) < 30);
  const std::string said = "the start differs from rank 0's: this rank starts fresh (no checkpoint in " +
                           (node1 / "run" / "checkpoints").string() + "), rank 0 resumes at step ";
  const auto at = run.output.find(said);
  REQUIRE(at != std::string::npos);
  CHECK(run.output.find("rank 1: " + said) != std::string::npos); // rank 0 says it too
  CHECK(run.output.find("shared file system") != std::string::npos);
  CHECK(run.output.find("collective") == std::string::npos);
}

TEST_CASE("a --resume checkpoint one rank cannot read ends every rank at once with that rank's reason") {
  // An explicit --resume path on a node-local disk: rank 1 could not open it and left before any
  // agreement, while rank 0 waited in the datasets' preparation for dist.prepare_timeout_s, then
  // blamed the preparation (the review of the F4 fix).
  const auto dir = tp::test::fresh_dir("ddp_resume_unreadable");
  train_earlier_run(dir, "run");
  const std::string args = " train --config '" + ddp_config() + "' --output-dir run --set train.epochs=2" + kSmall +
                           " --set dist.timeout_s=30 --set dist.prepare_timeout_s=60 --resume ";
  const auto run = tp::test::run_shell(two_ranks(dir, dir, args + "run/checkpoints/last.pt", dir,
                                                 args + "/nonexistent/last.pt", 47));
  INFO(run.output);
  CHECK(run.output.find("exits 4 4 ") != std::string::npos);
  CHECK(seconds_after(run.output) < 30);
  CHECK(run.output.find("rank 1: ") != std::string::npos); // rank 0 names the rank and its reason
  CHECK(run.output.find("/nonexistent/last.pt") != std::string::npos);
  CHECK(run.output.find("prepare_timeout_s") == std::string::npos);
}

// Cluster trial F9: a second training in a busy run directory (an earlier run's checkpoints in it,
// run.lock held by the training still running): rank 0 said "another training is running", rank 1
// judged the directory itself and said it held an earlier run's checkpoints (use --resume auto or
// --new-run, wrong advice for a live run), and the launcher named rank 1 as the failing rank.
TEST_CASE("a second training in a busy run directory: every rank stops with rank 0's reason") {
  const auto dir = tp::test::fresh_dir("ddp_busy_run_dir");
  train_earlier_run(dir, (dir / "run").string());
  REQUIRE(std::filesystem::exists(dir / "run" / "checkpoints" / "last.pt"));
  // The running training: a process holding run.lock (flock(2), as FileLock takes it).
  const std::string args = " train --config '" + ddp_config() + "' --output-dir '" + (dir / "run").string() +
                           "' --set train.epochs=2" + kSmall + " --set dist.timeout_s=30";
  const auto run = tp::test::run_shell("flock '" + (dir / "run" / "run.lock").string() + "' sleep 60 >/dev/null 2>&1 & F=$!; "
                                       "sleep 0.5; " + two_ranks(dir, dir, args, dir, args, 45) + "; pkill -P $F; kill $F");
  INFO(run.output);
  CHECK(run.output.find("exits 2 2 ") != std::string::npos);
  CHECK(seconds_after(run.output) < 30);
  const std::string said = "another training is running in " + (dir / "run").string();
  const auto at = run.output.find(said);
  REQUIRE(at != std::string::npos);
  CHECK(run.output.find("rank 0: host train: " + said) != std::string::npos); // rank 1 quotes rank 0
  CHECK(run.output.find("earlier run's checkpoints") == std::string::npos);
  CHECK(run.output.find("--new-run") == std::string::npos);
}

// `host eval` on several ranks summed shards evaluated with different settings into one result
// without a word: it did not run the configuration agreement `host train` runs.
TEST_CASE("host eval with ranks of different configurations stops at once with exit 2, naming the key") {
  const auto dir = tp::test::fresh_dir("ddp_eval_mixed_config");
  train_earlier_run(dir, (dir / "run").string());
  const std::string args = " eval --config '" + ddp_config() + "' --output-dir '" + (dir / "run").string() +
                           "' --checkpoint last" + kSmall + " --set dist.timeout_s=30";
  const auto run = tp::test::run_shell(two_ranks(dir, dir, args, dir, args + " --set eval.batch_size=4", 47));
  INFO(run.output);
  CHECK(run.output.find("exits 2 2 ") != std::string::npos);
  CHECK(seconds_after(run.output) < 30);
  const std::string said = "the resolved configuration differs from rank 0's: eval.batch_size: ";
  const auto at = run.output.find(said);
  REQUIRE(at != std::string::npos);
  CHECK(run.output.find(said, at + 1) != std::string::npos); // both ranks
  CHECK(!std::filesystem::exists(dir / "run" / "eval_last.json"));
}
