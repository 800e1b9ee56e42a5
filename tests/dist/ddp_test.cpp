// Data-parallel training is exact: 2 Gloo ranks x batch 16 train the same weights as 1 process
// x batch 32 (shuffled, short last batch, clipping, momentum, schedule), with and without
// gradient accumulation, through the built-in launcher and through torchrun; and the 2-rank
// evaluation of a checkpoint equals the 1-rank evaluation.
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/checkpoint_compare.h"
#include "integration/host_runner.h"

#include <doctest/doctest.h>

namespace {

using tp::test::max_relative_difference;

const std::string kConfig = "--config tests/dist/ddp.toml";

tp::LoadedCheckpoint train(const std::string& name, const std::string& launch, const std::string& sets) {
  const auto dir = tp::test::fresh_dir(name);
  const auto run = tp::test::run_host(launch + " " + kConfig + " --output-dir '" + dir.string() + "' " + sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return tp::load_checkpoint(dir / "checkpoints" / "last.pt");
}

}  // namespace

TEST_CASE("2 ranks x 16 train like 1 process x 32, with and without accumulation") {
  const auto single = train("ddp_single", "", "");
  const auto two = train("ddp_two", "--nproc-per-node 2", "--set train.batch_size=16");
  CHECK(two.step == single.step);
  CHECK(single.step == 2 * 32); // 31 full batches + the 8-sample tail, per epoch
  const double plain = max_relative_difference(single, two);
  MESSAGE("2 ranks x 16 vs 1 x 32: max relative difference " << plain);
  CHECK(plain < 1e-5);
  // 2 ranks x (8 x 2 micro-batches): the last window is one 4-sample micro-batch per rank.
  const auto accum = train("ddp_two_accum", "--nproc-per-node 2",
                           "--set train.batch_size=8 --set train.grad_accum_steps=2 --set dist.bucket_mb=0.001");
  CHECK(accum.step == single.step);
  const double accumulated = max_relative_difference(single, accum);
  MESSAGE("2 ranks x 8 x accumulation 2 (tiny buckets) vs 1 x 32: max relative difference " << accumulated);
  CHECK(accumulated < 1e-5);
  // The weights moved: the comparison is not between untouched models.
  const auto short_run = train("ddp_short", "", "--set train.epochs=1");
  CHECK(max_relative_difference(single, short_run) > 1e-3);
}

TEST_CASE("torchrun --no-python host works") {
  const std::string torchrun = std::string(TP_TEST_SOURCE_DIR) + "/.venv/bin/torchrun";
  if (!std::filesystem::exists(torchrun)) {
    MESSAGE("skipped: no " << torchrun);
    return;
  }
  const auto single = train("ddp_single_tr", "", "--set train.epochs=1");
  const auto dir = tp::test::fresh_dir("ddp_torchrun");
  const auto run = tp::test::run_shell("'" + torchrun + "' --standalone --nproc-per-node=2 --no-python '" +
                                       TP_TEST_BUILD_DIR + "/bin/host' " + kConfig + " --output-dir '" + dir.string() +
                                       "' --set train.batch_size=16 --set train.epochs=1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(max_relative_difference(single, tp::load_checkpoint(dir / "checkpoints" / "last.pt")) < 1e-5);
}

TEST_CASE("the 2-rank evaluation of a checkpoint equals the 1-rank evaluation") {
  const auto dir = tp::test::fresh_dir("ddp_eval");
  const std::string args = kConfig + " --output-dir '" + dir.string() + "'";
  REQUIRE(tp::test::run_host(args + " --set train.epochs=1").exit_code == 0);
  // 333 validation samples: the shards hold 167 and 166, and nothing is padded.
  const auto one = tp::test::run_host("eval " + args + " --checkpoint last");
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const std::string single = tp::test::read_text(dir / "eval_last.json");
  std::filesystem::remove(dir / "eval_last.json");
  const auto two = tp::test::run_host("--nproc-per-node 2 eval " + args + " --checkpoint last");
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK(tp::test::read_text(dir / "eval_last.json") == single);
  CHECK(single.find("val/accuracy") != std::string::npos);
}
