// Run budgets (docs/engine.md, "Budgets"): train.max_steps overrides the epochs and the schedule's
// length; train.max_time stops at a step boundary with exit 0, saves where it stopped, and a
// resumed run continues the same budget and, with the budget lifted, ends bitwise equal to a run
// that was never stopped.
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/history_reader.h"
#include "integration/host_runner.h"

#include <doctest/doctest.h>

namespace {

const std::string kBase = "--config tests/integration_oracle/ema.toml --set ema.enabled=false ";

}  // namespace

TEST_CASE("train.max_steps ends the run at that optimizer step, the schedule counting it") {
  const auto dir = tp::test::fresh_dir("budget_max_steps");
  const auto run = tp::test::run_host(kBase + "--output-dir '" + dir.string() +
                                      "' --set train.epochs=5 --set train.max_steps=70 --set checkpoint.strategy=\"epoch\" "
                                      "--set schedule.name=\"cosine\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("schedule cosine over 70 optimizer steps") != std::string::npos);
  const auto last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(last.step == 70);
  const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
  REQUIRE(epochs.size() == 2); // 50 steps per epoch: the second epoch ends at step 70
  CHECK(epochs.back().values.at("step") == 70);
}

TEST_CASE("train.max_time stops at a step boundary with exit 0; resume continues the budget and the run") {
  // 5 x 50 steps take about 7 s here (2,000 took 116 s of CI time, 400 took 12 s): the 1 s budget
  // ends near step 40, and would still end before the last step on a CPU five times as fast.
  const std::string sets = "--set train.epochs=5 --set checkpoint.strategy=\"epoch\" --set train.log_every_steps=50 ";
  const auto straight_dir = tp::test::fresh_dir("budget_time_straight");
  const auto straight = tp::test::run_host(kBase + sets + "--output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);

  const auto dir = tp::test::fresh_dir("budget_time");
  const auto stopped = tp::test::run_host(kBase + sets + "--output-dir '" + dir.string() + "' --set 'train.max_time=\"00:00:01\"'");
  INFO(stopped.output);
  REQUIRE(stopped.exit_code == 0);
  CHECK(stopped.output.find("train.max_time (00:00:01) is used up") != std::string::npos);
  const auto first = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(first.train_seconds >= 1.0);
  REQUIRE(first.step < 5 * 50); // the budget, not the epochs, ended it
  CHECK(first.batch == first.step % 50); // saved where it stopped (inside its epoch, or at the next one's start)
  // Exit 0 as a finished run; report.toml tells a requeue script it paused (cluster trial F12).
  CHECK(tp::test::read_text(dir / "report.toml").find("\npaused = true\n") != std::string::npos);

  // The same budget again: already used up, so exactly one more step.
  const auto again = tp::test::run_host(kBase + sets + "--output-dir '" + dir.string() +
                                        "' --set 'train.max_time=\"00:00:01\"' --resume auto");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  const auto second = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(second.step == first.step + 1);

  // Without a budget the resumed run finishes exactly as the straight one.
  const auto rest = tp::test::run_host(kBase + sets + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(rest.output);
  REQUIRE(rest.exit_code == 0);
  CHECK(tp::test::read_text(dir / "report.toml").find("paused") == std::string::npos); // finished
  const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(a.step == b.step);
  REQUIRE(a.model.size() == b.model.size());
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
}

TEST_CASE("a malformed train.max_time is a configuration error naming the key") {
  const auto run = tp::test::run_host(kBase + "--output-dir '" + tp::test::fresh_dir("budget_bad").string() +
                                      "' --set train.max_time=\"90 minutes\"");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("train.max_time") != std::string::npos);
  CHECK(run.output.find("HH:MM:SS") != std::string::npos);
}
