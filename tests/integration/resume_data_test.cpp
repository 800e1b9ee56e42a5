// A resume inside an epoch and the training data (data trial F1 and F8): the epoch's skipped bad
// samples before the stop are counted in its record after the resume, as in the run that never
// stopped; and a training split whose sample count changed since the checkpoint is refused inside
// an epoch (its order is a permutation of the count), and taken at an epoch's start.
#include <filesystem>
#include <fstream>
#include <string>

#include "history_reader.h"
#include "host_runner.h"
#include "support/class_folders.h"
#include "tp/framework/checkpoint/checkpoint.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

/// train/{dark,light}: 24 images each and 4 files that are no images; val/: 4 each.
fs::path write_data(const fs::path& dir) {
  tp::test::write_dark_light_folders(dir / "train", 24);
  tp::test::write_dark_light_folders(dir / "val", 4);
  for (int i = 0; i < 4; ++i) std::ofstream(dir / "train" / (i % 2 == 0 ? "dark" : "light") / ("bad" + std::to_string(i) + ".png")) << "truncated";
  const fs::path cfg = dir / "run.toml";
  std::ofstream(cfg) << tp::test::dark_light_run_config("resume_data", dir / "train", dir / "val", 8)
                     << "[checkpoint]\nstrategy = \"steps\"\nevery = 3\nkeep_last = 10\n";
  return cfg;
}

std::string args(const fs::path& cfg, const fs::path& out) {
  return "train --config '" + cfg.string() + "' --output-dir '" + out.string() +
         "' --set train.epochs=2 --set data.on_bad_sample=\"skip\" --set run.threads=1 --set 'progress.mode=\"off\"'";
}

/// data/skipped_samples of each epoch record, in order.
std::vector<double> skipped_per_epoch(const fs::path& out) {
  std::vector<double> counts;
  for (const auto& record : tp::test::read_history(out))
    if (record.kind == "epoch") counts.push_back(record.values.at("data/skipped_samples"));
  return counts;
}

}  // namespace

TEST_CASE("a resume inside an epoch counts the bad samples skipped before the stop in that epoch's record") {
  const fs::path dir = tp::test::fresh_dir("resume_data_skips");
  const fs::path cfg = write_data(dir), out = dir / "out";
  const auto whole = tp::test::run_host(args(cfg, out));
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  const std::vector<double> uninterrupted = skipped_per_epoch(out);
  REQUIRE(uninterrupted == std::vector<double>{4.0, 4.0});
  // Step 3 is inside epoch 1 (52 samples, 7 batches of 8 with the tail): some of its bad files
  // were skipped before it, so a resume that forgot them would record fewer than 4.
  const fs::path inside = out / "checkpoints" / "step-00000003.pt";
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(inside);
  REQUIRE(saved.batch == 3);
  CHECK(saved.train_samples == 52);
  REQUIRE(saved.epoch_skipped >= 1);
  CHECK(saved.epoch_skipped < 4);
  const auto resumed = tp::test::run_host(args(cfg, out) + " --resume '" + inside.string() + "'");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(skipped_per_epoch(out) == uninterrupted);
  // Step 6 is epoch 1's last batch (48 samples in 6 batches of 8): the resumed process reads none,
  // yet the epoch's record holds its 4 skips (the review: it stopped as "every sample failed").
  const fs::path last_batch = out / "checkpoints" / "step-00000006.pt";
  REQUIRE(tp::load_checkpoint(last_batch).batch == 6);
  CHECK(tp::load_checkpoint(last_batch).epoch_skipped == 4);
  const auto at_end = tp::test::run_host(args(cfg, out) + " --resume '" + last_batch.string() + "'");
  INFO(at_end.output);
  CHECK(at_end.exit_code == 0);
  CHECK(skipped_per_epoch(out) == uninterrupted);
  CHECK(resumed.output.find("epoch 1: skipped " + std::to_string(4 - saved.epoch_skipped) + " bad samples since the resume, besides " +
                            std::to_string(saved.epoch_skipped) + " before it (every rank's, not listed)") != std::string::npos);
}

TEST_CASE("a training split whose sample count changed since the checkpoint is refused inside an epoch, taken at its start") {
  const fs::path dir = tp::test::fresh_dir("resume_data_changed");
  const fs::path cfg = write_data(dir), out = dir / "out";
  const auto first = tp::test::run_host(args(cfg, out) + " --set train.epochs=1");
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  // A labeller's fixes land in the folder while the job waits in the queue: three more images.
  for (int i = 0; i < 3; ++i)
    fs::copy_file(dir / "train" / "dark" / "0.png", dir / "train" / "dark" / ("added" + std::to_string(i) + ".png"));
  const std::string before = tp::test::read_text(out / "history.jsonl");
  const auto refused = tp::test::run_host(args(cfg, out) + " --set train.epochs=1 --resume '" + (out / "checkpoints" / "step-00000003.pt").string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("the checkpoint stopped inside epoch 1 after 3 batch(es) of a training split of 52 samples, "
                            "which now has 55") != std::string::npos);
  CHECK(refused.output.find("train.init_weights") != std::string::npos);
  CHECK(tp::test::read_text(out / "history.jsonl") == before);
  // last.pt stands at epoch 1's end: the next epoch draws its order from the new count.
  const auto next = tp::test::run_host(args(cfg, out) + " --resume auto");
  INFO(next.output);
  CHECK(next.exit_code == 0);
  CHECK(next.output.find("resume: the training split has 55 samples, the checkpoint's run had 52") != std::string::npos);
  CHECK(skipped_per_epoch(out).size() == 2);
}

TEST_CASE("data.max_bad_fraction: an epoch skipping more than that share of its samples stops the run, naming the files") {
  // 4 bad files among the 48 samples an epoch reads (8.3%; the loader drops the last 4 of 52): trained
  // under the default 0.1 (the cases above), stopped under 0.05.
  const fs::path dir = tp::test::fresh_dir("resume_data_bad_fraction");
  const fs::path cfg = write_data(dir), out = dir / "out";
  const auto stopped = tp::test::run_host(args(cfg, out) + " --set data.max_bad_fraction=0.05");
  INFO(stopped.output);
  CHECK(stopped.exit_code == 1);
  CHECK(stopped.output.find("epoch 1: 4 of 48 training samples (8.33%) failed to load, more than "
                            "data.max_bad_fraction = 0.05 allows") != std::string::npos);
  CHECK(stopped.output.find("bad0.png") != std::string::npos);
  CHECK(stopped.output.find("--samples all") != std::string::npos);
  CHECK(skipped_per_epoch(out).empty());  // the epoch never ended: no record, no epoch-end save
}
