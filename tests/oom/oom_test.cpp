// train.on_oom (docs/engine.md, "Out of memory"), with oom_model's injected out-of-memory errors
// (the c10::OutOfMemoryError a CUDA allocation throws): "split" cuts the micro-batch in halves and
// trains on exactly like a run that fits (same weights to rounding, same step count), records the
// split in the checkpoint and keeps it on --resume; 2 ranks agree on it when one rank runs out; what
// cannot be undone (a backward after earlier pieces of the window) and on_oom = "fail" stop with
// the report naming the batch size, the peak memory and host tune batch-size.
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/checkpoint_compare.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
using tp::test::max_relative_difference;

const std::string kOomArgs = "--config tests/oom/oom.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) + "' ";

struct Trained {
  tp::test::HostRun run;
  fs::path dir;
  tp::LoadedCheckpoint checkpoint() const { return tp::load_checkpoint(dir / "checkpoints" / "last.pt"); }
};

Trained train(const std::string& name, const std::string& sets, const std::string& launch = "") {
  Trained t{{}, tp::test::fresh_dir(name)};
  t.run = tp::test::run_host(launch + " " + kOomArgs + "--output-dir '" + t.dir.string() + "' " + sets);
  return t;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The run every split must reproduce: 1 process x 32, nothing runs out of memory (trained once).
const tp::LoadedCheckpoint& fitting_run() {
  static const tp::LoadedCheckpoint fitting = [] {
    const Trained t = train("oom_fits", "");
    INFO(t.run.output);
    REQUIRE(t.run.exit_code == 0);
    CHECK(t.run.output.find("out of memory") == std::string::npos);
    return t.checkpoint();
  }();
  return fitting;
}

}  // namespace

TEST_CASE("on_oom = split: an out-of-memory forward cuts micro-batches in halves; the weights are the run that fits") {
  const auto& fitting = fitting_run();
  CHECK(fitting.micro_batch_splits == 1);
  // 32 does not fit, 16 does: one split, in the run's first forward.
  const Trained halves = train("oom_forward_halves", "--set model.forward_limit=16");
  INFO(halves.run.output);
  REQUIRE(halves.run.exit_code == 0);
  CHECK(count(halves.run.output, "out of memory in the forward of 32 samples at step 1") == 1);
  CHECK(halves.run.output.find("cut in 2 pieces of at most 16 samples") != std::string::npos);
  const auto split = halves.checkpoint();
  CHECK(split.micro_batch_splits == 2);
  CHECK(split.step == fitting.step);
  const double difference = max_relative_difference(fitting, split);
  MESSAGE("32 x 1 vs 2 pieces of 16: max relative difference " << difference);
  CHECK(difference < 1e-5);
  // 10 fits neither 32 nor 16: two splits in a row on the same batch, pieces of 8.
  const Trained quarters = train("oom_forward_quarters", "--set model.forward_limit=10");
  INFO(quarters.run.output);
  REQUIRE(quarters.run.exit_code == 0);
  CHECK(count(quarters.run.output, "out of memory in the forward") == 2);
  CHECK(quarters.run.output.find("out of memory in the forward of 16 samples at step 1") != std::string::npos);
  CHECK(quarters.checkpoint().micro_batch_splits == 4);
  CHECK(max_relative_difference(fitting, quarters.checkpoint()) < 1e-5);
  // The weights moved: the comparison is not between untouched models.
  const Trained short_run = train("oom_short", "--set train.epochs=1");
  REQUIRE(short_run.run.exit_code == 0);
  CHECK(max_relative_difference(fitting, short_run.checkpoint()) > 1e-3);
}

TEST_CASE("on_oom = split: a backward that runs out of memory at the window's start is undone and split") {
  const auto& fitting = fitting_run();
  // Runs out after the head's gradients were written: they must be dropped before the halves.
  const Trained t = train("oom_backward", "--set model.backward_limit=16");
  INFO(t.run.output);
  REQUIRE(t.run.exit_code == 0);
  CHECK(count(t.run.output, "out of memory in the backward of 32 samples at step 1") == 1);
  CHECK(t.checkpoint().micro_batch_splits == 2);
  CHECK(max_relative_difference(fitting, t.checkpoint()) < 1e-5);
  // With accumulation: 16 x 2 micro-batches, the second window's first backward runs out.
  const Trained accumulated = train("oom_backward_accum", "--set train.batch_size=16 --set train.grad_accum_steps=2 "
                                                          "--set model.backward_limit=8 --set model.fault_from_call=3");
  INFO(accumulated.run.output);
  REQUIRE(accumulated.run.exit_code == 0);
  CHECK(accumulated.run.output.find("out of memory in the backward of 16 samples at step 2") != std::string::npos);
  CHECK(max_relative_difference(fitting, accumulated.checkpoint()) < 1e-5);
}

TEST_CASE("on_oom = split keeps the split across --resume") {
  // SIGTERM a few logged steps in, then resume: the pieces come from the checkpoint, so the
  // resumed run never runs out of memory again, and it ends bitwise where a straight run ends.
  const std::string sets = "--set model.forward_limit=16 --set data.train.size=16384 ";
  const Trained straight = train("oom_resume_straight", sets);
  INFO(straight.run.output);
  REQUIRE(straight.run.exit_code == 0);
  const auto dir = tp::test::fresh_dir("oom_resume");
  const auto interrupted =
      tp::test::run_host_until_history(kOomArgs + sets + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 3);
  INFO(interrupted.output);
  REQUIRE(interrupted.output.find("exit=143") != std::string::npos);
  const auto saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.micro_batch_splits == 2);
  const auto resumed = tp::test::run_host(kOomArgs + sets + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("resuming with micro-batches cut in 2 pieces") != std::string::npos);
  CHECK(resumed.output.find("out of memory in the forward") == std::string::npos);
  const auto a = straight.checkpoint();
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(b.micro_batch_splits == 2);
  REQUIRE(a.step == b.step);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
}

TEST_CASE("on_oom = split on 2 ranks: rank 1 runs out, every rank takes its split, the weights are the same") {
  const Trained fits = train("oom_ddp_fits", "--set train.batch_size=16", "--nproc-per-node 2");
  INFO(fits.run.output);
  REQUIRE(fits.run.exit_code == 0);
  const Trained split = train("oom_ddp_split", "--set train.batch_size=16 --set model.forward_limit=8 --set model.oom_rank=1",
                              "--nproc-per-node 2");
  INFO(split.run.output);
  REQUIRE(split.run.exit_code == 0);
  // Rank 0 did not run out itself; it learns the pieces of every rank in the agreement.
  CHECK(split.run.output.find("out of memory in the forward") == std::string::npos);
  CHECK(split.run.output.find("micro-batch pieces per rank after out of memory (0: 1, 1: 2): every rank cuts in 2") !=
        std::string::npos);
  const auto a = fits.checkpoint();
  const auto b = split.checkpoint();
  CHECK(b.micro_batch_splits == 2);
  CHECK(a.step == b.step);
  const double difference = max_relative_difference(a, b);
  MESSAGE("2 ranks x 16 vs 2 ranks x 2 pieces of 8: max relative difference " << difference);
  CHECK(difference < 1e-5);
}

TEST_CASE("what a split cannot undo, and on_oom = fail, stop with the report") {
  SUBCASE("on_oom = fail: the batch size, the peak memory and what to do") {
    const Trained t = train("oom_fail", "--set train.on_oom=\"fail\" --set model.forward_limit=16");
    INFO(t.run.output);
    CHECK(t.run.exit_code == 1);
    CHECK(t.run.output.find("out of memory on cpu in the forward of 32 samples at step 1 (epoch 1; "
                            "train.batch_size = 32, train.grad_accum_steps = 1)") != std::string::npos);
    CHECK(t.run.output.find("peak memory (resident, whole process)") != std::string::npos);
    CHECK(t.run.output.find("host tune batch-size --keep-global-batch") != std::string::npos);
    CHECK(t.run.output.find("set train.on_oom = \"split\"") != std::string::npos);
    CHECK(t.run.output.find("oom_model: test fault") != std::string::npos);
  }
  SUBCASE("a backward after earlier pieces of the window added to the gradients") {
    // 16 x 2: the second window's second backward (forward call 4) runs out.
    const Trained t = train("oom_mid_window", "--set train.batch_size=16 --set train.grad_accum_steps=2 "
                                              "--set model.backward_limit=8 --set model.fault_from_call=4");
    INFO(t.run.output);
    CHECK(t.run.exit_code == 1);
    CHECK(t.run.output.find("cannot recover: it came in a backward after earlier pieces of this accumulation window") !=
          std::string::npos);
    CHECK(t.run.output.find("out of memory on cpu in the backward of 16 samples at step 2") != std::string::npos);
  }
  SUBCASE("a single sample that does not fit") {
    const Trained t = train("oom_single", "--set model.forward_limit=0 --set train.batch_size=2");
    INFO(t.run.output);
    CHECK(t.run.exit_code == 1);
    CHECK(t.run.output.find("cannot recover: a single sample does not fit") != std::string::npos);
  }
}
