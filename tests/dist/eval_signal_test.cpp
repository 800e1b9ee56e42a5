// A stop signal during an evaluation (cluster trial F7): both ranks abandon the evaluation within
// a batch, agree on it in the pass's closing all-reduce, save, and exit with the signal's code; the
// resumed run repeats that evaluation, so its weights, best checkpoint, ranking and history equal
// an uninterrupted run's bit for bit. Before, the evaluation ran to its end (minutes on a large
// validation split, past SLURM's KillWait) and the run trained one more step before saving.
#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

/// 2 ranks, 10 optimizer steps per epoch, a validation split of 40000 samples in batches of 4 (a
/// pass of seconds), every step logged.
std::string eval_run_args(const std::filesystem::path& dir, const std::string& extra) {
  return " --nproc-per-node 2 train --config tests/dist/ddp.toml --output-dir '" + dir.string() +
         "' --set data.train.size=640 --set data.train.val_size=40000 --set eval.batch_size=4"
         " --set train.log_every_steps=1 --set eval.sanity_batches=0" + extra;
}

/// Whether the two checkpoints hold the same step and bitwise the same weights.
void check_same_weights(const std::filesystem::path& a_path, const std::filesystem::path& b_path) {
  INFO(a_path.string());
  const tp::LoadedCheckpoint a = tp::load_checkpoint(a_path), b = tp::load_checkpoint(b_path);
  CHECK(a.step == b.step);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
}

/// Trains with `extra` uninterrupted, then again with SIGTERM sent to the launcher 0.5 s after
/// history.jsonl has `lines` lines (the evaluation after step `step` is running), then resumes
/// that run: the stop is quick and says so, and the resumed run ends as the uninterrupted one.
void check_stop_during_evaluation(const std::string& name, const std::string& extra, int lines, int step) {
  const auto straight_dir = tp::test::fresh_dir(name + "_straight");
  const auto straight = tp::test::run_host(eval_run_args(straight_dir, extra));
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);

  const auto dir = tp::test::fresh_dir(name);
  const std::string host = std::string("'") + tp::test::build_dir() + "/bin/host'";
  const std::string history = (dir / "history.jsonl").string();
  const auto stopped = tp::test::run_shell(
      host + eval_run_args(dir, extra) + " > '" + (dir / "launcher.log").string() + "' 2>&1 & L=$!; " +
      "for i in $(seq 3000); do [ \"$(cat '" + history + "' 2>/dev/null | wc -l)\" -ge " + std::to_string(lines) +
      " ] && break; sleep 0.02; done; sleep 0.5; S=$(date +%s%N); kill -TERM $L; wait $L; C=$?; "
      "echo \"exit $C after $(( ($(date +%s%N) - S) / 1000000 )) ms\"; cat '" + (dir / "launcher.log").string() + "'");
  INFO(stopped.output);
  CHECK(tp::test::contains(stopped.output, "exit 143 after "));
  // Both ranks stop at the evaluated step, not one step later, and say the evaluation is owed.
  const std::string said = "stopped by signal 15 at step " + std::to_string(step) + " during its evaluation; saved ";
  const auto first = stopped.output.find(said);
  REQUIRE(first != std::string::npos);
  CHECK(stopped.output.find(said, first + 1) != std::string::npos);
  CHECK(tp::test::contains(stopped.output, "which runs that evaluation again first"));
  // Within a batch or two of the signal, not the rest of the evaluation (seconds).
  const auto after = stopped.output.find(" after ");
  REQUIRE(after != std::string::npos);
  CHECK(std::stoll(stopped.output.substr(after + 7)) < 2000);
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step == step);
  CHECK(saved.eval_pending != 0);

  const auto resumed = tp::test::run_host(eval_run_args(dir, extra) + " --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  check_same_weights(straight_dir / "checkpoints" / "last.pt", dir / "checkpoints" / "last.pt");
  check_same_weights(straight_dir / "checkpoints" / "best.pt", dir / "checkpoints" / "best.pt");
  CHECK(tp::test::read_text(straight_dir / "checkpoints" / "best.tsv") == tp::test::read_text(dir / "checkpoints" / "best.tsv"));
  // Every record once and equal, measurements aside: no evaluation logged twice or skipped.
  CHECK(tp::test::without_timings(dir) == tp::test::without_timings(straight_dir));
}

}  // namespace

TEST_CASE("a stop signal during an epoch's evaluation saves at once; the resume repeats it exactly") {
  // Epoch 2's end (after step 20: 20 step records and epoch 1's), with SWA folding epoch 2 (not
  // twice), an EMA evaluated beside the live weights, and early stopping's state.
  check_stop_during_evaluation("eval_signal_epoch",
                               " --set train.epochs=3 --set swa.enabled=true --set swa.start_epoch=2 --set swa.lr=0.01"
                               " --set ema.enabled=true --set early_stopping.patience=5"
                               " --set early_stopping.monitor=\\\"val/loss\\\"",
                               21, 20);
}

TEST_CASE("a stop signal during an eval.strategy = \"steps\" evaluation: the resume evaluates that step first") {
  check_stop_during_evaluation("eval_signal_steps",
                               " --set train.epochs=1 --set eval.strategy=\\\"steps\\\" --set eval.every=5"
                               " --set checkpoint.strategy=\\\"steps\\\" --set checkpoint.every=5",
                               5, 5);
}

// The review of 0d612c0: the owed evaluation's own decision to stop (here early stopping's
// stop_below) was ignored by the resumed run, which trained step 6 and evaluated it; the
// uninterrupted run ends at step 5.
TEST_CASE("a resume whose owed \"steps\" evaluation stops the run early stops where the uninterrupted run stopped") {
  check_stop_during_evaluation("eval_signal_steps_early_stop",
                               " --set train.epochs=1 --set eval.strategy=\\\"steps\\\" --set eval.every=5"
                               " --set checkpoint.strategy=\\\"steps\\\" --set checkpoint.every=5"
                               " --set early_stopping.patience=5 --set early_stopping.stop_below=100",
                               5, 5);
}

// The review of 0d612c0: a rank that evaluated no batch (here an empty shard: one validation
// sample on two ranks; also a rank a stop signal reached before its first batch) had no named
// loss terms (weighted_sum's) to send, so the ranks' sum lists did not line up and both waited in
// the all-reduce for dist.timeout_s and failed. The ranks now agree on the terms first.
TEST_CASE("an evaluation where one rank has no batch, with a loss of named terms: the ranks agree on them") {
  const auto dir = tp::test::fresh_dir("eval_terms_empty_shard");
  const auto run = tp::test::run_host(
      "--nproc-per-node 2 train --config tests/dist/ddp.toml --output-dir '" + dir.string() +
      "' --set data.train.size=640 --set data.train.val_size=1 --set train.epochs=1 --set eval.sanity_batches=0"
      " --set dist.timeout_s=20 --set loss.component=\\\"org.torchhost.weighted_sum\\\""
      " --set 'loss.losses=[\"cross_entropy\", \"cross_entropy\"]' --set 'loss.outputs=[\"logits\", \"logits\"]'"
      " --set 'loss.targets=[\"label\", \"label\"]' --set 'loss.weights=[1.0, 0.5]'");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  const auto evals = tp::test::rows_of(tp::test::read_history(dir), "epoch");
  REQUIRE(evals.size() == 1);
  CHECK(evals.front().has("val/loss/logits_0"));
  CHECK(evals.front().values.at("val/loss/logits_1") == doctest::Approx(0.5 * evals.front().values.at("val/loss/logits_0")));
}

// A stop signal that reaches one rank alone (a user's kill, one node preempted; no launcher to
// forward it): the rank it reached leaves a note in the rendezvous store, and the other stops its
// own shard of the evaluation within a poll (kNoticePoll) instead of finishing it (3 s here).
TEST_CASE("a stop signal to one rank alone during an evaluation stops the other's shard too") {
  const auto dir = tp::test::fresh_dir("eval_signal_one_rank");
  const std::string host = std::string("'") + tp::test::build_dir() + "/bin/host'";
  const std::string args = " train --config tests/dist/ddp.toml --output-dir '" + dir.string() +
                           "' --set data.train.size=640 --set data.train.val_size=120000 --set eval.batch_size=4"
                           " --set train.log_every_steps=1 --set eval.sanity_batches=0 --set train.epochs=1";
  const auto log = [&](int rank) { return "'" + (dir / ("rank" + std::to_string(rank) + ".log")).string() + "'"; };
  const auto run = tp::test::run_shell(
      "export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + ($$ + 17) % 20000)) WORLD_SIZE=2; "
      "RANK=0 LOCAL_RANK=0 " + host + args + " > " + log(0) + " 2>&1 & P0=$!; "
      "RANK=1 LOCAL_RANK=1 " + host + args + " > " + log(1) + " 2>&1 & P1=$!; "
      "for i in $(seq 3000); do [ \"$(cat '" + (dir / "history.jsonl").string() + "' 2>/dev/null | wc -l)\" -ge 10 ] && "
      "break; sleep 0.02; done; sleep 0.5; S=$(date +%s%N); kill -TERM $P1; wait $P0; C0=$?; wait $P1; C1=$?; "
      "echo \"exits $C0 $C1 after $(( ($(date +%s%N) - S) / 1000000 )) ms\"; cat " + log(0) + " " + log(1));
  INFO(run.output);
  CHECK(tp::test::contains(run.output, "exits 143 143 after "));
  const auto after = run.output.find(" after ");
  REQUIRE(after != std::string::npos);
  CHECK(std::stoll(run.output.substr(after + 7)) < 2000);
  const std::string said = "stopped by signal 15 at step 10 during its evaluation; saved ";
  const auto first = run.output.find(said);
  REQUIRE(first != std::string::npos);
  CHECK(run.output.find(said, first + 1) != std::string::npos); // both ranks
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step == 10);
  CHECK(saved.eval_pending == 2);
}
