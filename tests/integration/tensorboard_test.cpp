// [logging] tensorboard end to end: configs/multi_output.toml (per-term losses, two metrics) trained
// for a few seconds, its event file read back by TensorBoard's own EventAccumulator
// (tensorboard_oracle.py in the project venv): every history value at its step, the config text,
// the hparams, the plots. Then the same run killed mid-epoch after its first checkpoint (SIGKILL:
// the event file holds steps the checkpoint does not) and continued with --resume auto: no tag
// holds a step twice, and every series equals the uninterrupted run's history.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/monitor/tensorboard_events.h"
#include "tp/framework/monitor/tfrecord.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

// 384 samples / 32 = 12 steps an epoch, 3 epochs, a step record every 2 steps: about 2 s on 2 cores.
const std::string kTensorboardArgs =
    "--config configs/multi_output.toml --set train.epochs=3 --set data.train.size=384 --set data.train.val_size=64 "
    "--set train.batch_size=32 --set train.log_every_steps=2 --set progress.mode=\"off\" --set run.threads=1 "
    "--set logging.tensorboard=true --set logging.tensorboard_images=true ";

tp::test::HostRun oracle(const std::string& run_dir, const std::string& reference = "") {
  return tp::test::run_shell(std::string("'") + tp::test::python() + "' tests/integration/tensorboard_oracle.py '" + run_dir +
                             "'" + (reference.empty() ? "" : " '" + reference + "'"));
}

}  // namespace

TEST_CASE("TensorBoard shows every history value, the config and the hparams; a resumed run repeats no step") {
  const auto straight_dir = tp::test::fresh_dir("tensorboard_straight");
  const auto straight = tp::test::run_host(kTensorboardArgs + "--output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  const auto checked = oracle(straight_dir.string());
  INFO(checked.output);
  REQUIRE(checked.exit_code == 0);
  CHECK(checked.output.starts_with("ok "));
  CHECK(checked.output.find(" images 0") == std::string::npos); // the plots came along

  // Killed in epoch 2, after epoch 1's checkpoint (step 12) and a few step records past it.
  const auto dir = tp::test::fresh_dir("tensorboard_resumed");
  const auto killed =
      tp::test::run_host_until_history(kTensorboardArgs + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 10, "KILL");
  INFO(killed.output);
  REQUIRE(killed.output.find("exit=137") != std::string::npos);
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step == 12);
  // The event file holds steps past the checkpoint, which the resume must drop (history.jsonl is
  // written before its event, so the last line seen may have missed the kill).
  int64_t last_step = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "tensorboard")) {
    const std::string bytes = tp::test::read_text(entry.path());
    for (std::string_view record : tp::split_tfrecords(bytes).records)
      last_step = std::max(last_step, tp::inspect_event(record).step);
  }
  CHECK(last_step >= 16);

  const auto resumed = tp::test::run_host(kTensorboardArgs + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("resumed at epoch 2") != std::string::npos);
  const auto compared = oracle(dir.string(), straight_dir.string());
  INFO(compared.output);
  CHECK(compared.exit_code == 0);
  CHECK(compared.output.starts_with("ok "));
}

namespace {

// The steps at which plots/loss went into the event file: one per redraw of the plots.
std::vector<int64_t> plot_redraw_steps(const std::filesystem::path& run_dir) {
  std::vector<int64_t> steps;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir / "tensorboard")) {
    const std::string bytes = tp::test::read_text(entry.path());  // the records point into it
    for (std::string_view record : tp::split_tfrecords(bytes).records) {
      const tp::EventInfo event = tp::inspect_event(record);
      if (std::find(event.tags.begin(), event.tags.end(), "plots/loss") != event.tags.end()) steps.push_back(event.step);
    }
  }
  return steps;
}

}  // namespace

TEST_CASE("plots.min_interval_s: at most one redraw per interval, and one at the end of training") {
  // Soak trial F3: a redraw after every evaluation re-read and re-rendered the whole history.
  // 12 steps, an evaluation every 2: six evaluations, each of which used to redraw.
  const std::string args = kTensorboardArgs + "--set train.epochs=1 --set eval.strategy=\"steps\" --set eval.every=2 ";
  const auto every_dir = tp::test::fresh_dir("plots_every_evaluation");
  const auto every = tp::test::run_host(args + "--set plots.min_interval_s=0 --output-dir '" + every_dir.string() + "'");
  INFO(every.output);
  REQUIRE(every.exit_code == 0);
  CHECK(plot_redraw_steps(every_dir) == std::vector<int64_t>{2, 4, 6, 8, 10, 12});
  const auto spaced_dir = tp::test::fresh_dir("plots_interval");
  const auto spaced = tp::test::run_host(args + "--set plots.min_interval_s=3600 --output-dir '" + spaced_dir.string() + "'");
  INFO(spaced.output);
  REQUIRE(spaced.exit_code == 0);
  CHECK(plot_redraw_steps(spaced_dir) == std::vector<int64_t>{2, 12});  // the first, then the end of training
  CHECK(std::filesystem::exists(spaced_dir / "plots" / "loss.png"));
}
