// Checkpoints of an earlier host still resume, exactly (issue 26: the engine was reshaped, the
// checkpoint format was not). The fixtures were written by the host of the commit they are named
// after (tests/fixtures/checkpoints/make.sh, with the run in run_args): step10 is a position
// inside epoch 2, last the end of the run. Today's host must (1) train the same run to the same
// weights, bit for bit, and (2) continue the old step-10 checkpoint to those weights too.
#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(tp::test::source_dir()) / "tests/fixtures/checkpoints";
const std::string kWrittenBy = "e6d0e51";

/// Whether the live weights and the EMA of `a` and `b` are bitwise equal (names in order).
void check_same_weights(const tp::LoadedCheckpoint& a, const tp::LoadedCheckpoint& b) {
  for (const std::string which : {"live", "ema"}) {
    CAPTURE(which);
    const tp::NamedWeights& x = a.weights(which, "test");
    const tp::NamedWeights& y = b.weights(which, "test");
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(x[i].first);
      CHECK(x[i].first == y[i].first);
      CHECK(at::equal(x[i].second, y[i].second));
    }
  }
  CHECK(a.step == b.step);
}

/// The run's arguments (one line; the trailing newline dropped).
std::string run_args() {
  std::string args = tp::test::read_text(kFixtures / "run_args");
  while (!args.empty() && (args.back() == '\n' || args.back() == ' ')) args.pop_back();
  return args;
}

}  // namespace

TEST_CASE("a checkpoint written before issue 26 resumes exactly with today's host") {
  const tp::LoadedCheckpoint old_end = tp::load_checkpoint(kFixtures / (kWrittenBy + "_last.pt"));
  REQUIRE(old_end.step == 24);

  // (1) The same run trained by today's host ends with the old host's weights.
  const auto straight_dir = tp::test::fresh_dir("old_checkpoint_straight");
  const auto straight = tp::test::run_host("train " + run_args() + " --output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  check_same_weights(tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt"), old_end);

  // (2) The old step-10 checkpoint, inside epoch 2, continued by today's host.
  const auto dir = tp::test::fresh_dir("old_checkpoint_resumed");
  std::filesystem::create_directories(dir / "checkpoints");
  std::filesystem::copy_file(kFixtures / (kWrittenBy + "_step10.pt"), dir / "checkpoints" / "last.pt");
  const tp::LoadedCheckpoint old_middle = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(old_middle.step == 10);
  CHECK(old_middle.epoch == 1);
  const auto resumed =
      tp::test::run_host("train " + run_args() + " --output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("resumed at epoch 2") != std::string::npos);
  check_same_weights(tp::load_checkpoint(dir / "checkpoints" / "last.pt"), old_end);
}
