// The top-k ranking of best checkpoints (checkpoint_manager.h): a fine-tuning trial's run with
// save_top_k = 2 saved twice at its last step (the epoch's save, then the run's final one) and
// ranked that one evaluation twice: best.tsv listed steps 60 and 60, and the runner-up's file
// (step 45) was deleted. A step is ranked once, and a best.tsv that ranks one twice is mended.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_manager.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

tp::CheckpointSection top_two() {
  return {.strategy = tp::IntervalStrategy::kSteps, .every = 15, .save_last = true, .keep_last = 0, .save_top_k = 2,
          .load_best_at_end = false, .monitor = "val/accuracy", .mode = "max"};
}

/// best.tsv's steps, best first.
std::vector<int64_t> ranked_steps(const fs::path& dir) {
  std::ifstream in(dir / "best.tsv");
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) continue;
    double value = 0;
    int64_t step = 0;
    std::istringstream(line) >> value >> step;
    steps.push_back(step);
  }
  return steps;
}

}  // namespace

TEST_CASE("top-k: a second save at a ranked step replaces its entry; the runner-up and its file stay") {
  const fs::path dir = tp::test::fresh_dir("top_k_same_step") / "checkpoints";
  std::vector<tp::StateTensor> model{{"w", at::zeros({2}), false}};
  tp::CheckpointContents contents;
  contents.model_state = &model;
  contents.config_toml = "[run]\n";
  tp::CheckpointManager manager(dir, top_two(), /*writer=*/true);
  for (const auto& [step, accuracy] : {std::pair<int64_t, double>{15, 0.5}, {30, 0.6}, {45, 0.7}, {60, 0.8}}) {
    contents.step = step;
    manager.save(contents, step, /*periodic=*/true, accuracy);
  }
  // The run's final save at its last step, with the same evaluation.
  manager.save(contents, 60, /*periodic=*/true, 0.8);
  CHECK(ranked_steps(dir) == std::vector<int64_t>{60, 45});
  CHECK(fs::exists(dir / tp::numbered_checkpoint_name("best-step-", 45)));
  CHECK(fs::exists(dir / tp::numbered_checkpoint_name("best-step-", 60)));
  CHECK(fs::exists(dir / "best.pt"));

  // A best.tsv written before the fix, ranking step 60 twice: resuming keeps one entry per step.
  std::ofstream(dir / "best.tsv") << "# value\tstep\tfile (best first; monitor val/accuracy, mode max)\n0.8\t60\t"
                                  << tp::numbered_checkpoint_name("best-step-", 60) << "\n0.8\t60\t"
                                  << tp::numbered_checkpoint_name("best-step-", 60) << "\n";
  tp::CheckpointManager resumed(dir, top_two(), /*writer=*/true);
  resumed.restore();
  contents.step = 75;
  resumed.save(contents, 75, /*periodic=*/true, 0.65);  // ranks second: room for it beside step 60
  CHECK(ranked_steps(dir) == std::vector<int64_t>{60, 75});
}
