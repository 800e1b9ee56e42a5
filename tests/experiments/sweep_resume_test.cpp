// host sweep stopped by SIGTERM in its second cell: the cell saves and the sweep exits 143; the
// same command again skips the first cell untouched and resumes the second from its last.pt,
// ending with the weights and history of a sweep that was never stopped (as resume_test.cpp
// asserts for a single run: dropout makes the RNG state part of what must be restored).
#include <ATen/ATen.h>

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "experiment_helpers.h"
#include "integration/history_reader.h"
#include "tp/framework/checkpoint/checkpoint.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

// Two cells of 1024 / 16 = 64 steps per epoch, two epochs: 128 steps, a history line every 4.
const std::string kGrid =
    "--grid optim.lr=0.003,0.01 --set data.train.size=1024 --set train.batch_size=16 --set train.log_every_steps=4 "
    "--set model.dropout=0.2 --set data.num_workers=2";
const std::string kFirst = "optim.lr=0.003";
const std::string kSecond = "optim.lr=0.01";

std::string sweep(const fs::path& dir) {
  return "sweep " + tp::test::kTiny + kGrid + " --output-dir '" + dir.string() + "'";
}

std::string status_of(const fs::path& dir, const std::string& cell) {
  const toml::table record = toml::parse_file((dir / "sweep.toml").string());
  for (const toml::node& node : *record["cells"].as_array())
    if (node.as_table()->at("name").value<std::string>() == cell)
      return node.as_table()->at("status").value_or(std::string());
  return "";
}


}  // namespace

TEST_CASE("a sweep stopped in its second cell resumes it exactly and skips the finished first") {
  const auto straight_dir = tp::test::fresh_dir("sweep_straight");
  const auto straight = tp::test::run_host(sweep(straight_dir));
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);

  // Stop the sweep once the second cell has logged a few steps.
  const auto dir = tp::test::fresh_dir("sweep_interrupted");
  const auto stopped =
      tp::test::run_host_until_history(sweep(dir), dir / kSecond / "history.jsonl", 4);
  INFO(stopped.output);
  REQUIRE(stopped.output.find("exit=143") != std::string::npos);
  CHECK(stopped.output.find("run the same command again") != std::string::npos);
  CHECK(status_of(dir, kFirst) == "done");
  CHECK(status_of(dir, kSecond) == "interrupted");
  CHECK_FALSE(fs::exists(dir / "comparison.csv"));
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / kSecond / "checkpoints" / "last.pt");
  CHECK(saved.step >= 16);
  CHECK(saved.step < 128);

  // Run again with a changed setting, the stopped cell is refused before anything trains: resumed,
  // it would continue the checkpoint's optimizer while its config.toml said the new weight decay.
  const std::string second_history = tp::test::read_text(dir / kSecond / "history.jsonl");
  const auto changed = tp::test::run_host(sweep(dir) + " --set optim.weight_decay=0.5");
  INFO(changed.output);
  CHECK(changed.exit_code == 2);
  CHECK(changed.output.find("the cell '" + kSecond + "' in " + (dir / kSecond).string() +
                            " stopped with another configuration") != std::string::npos);
  CHECK(changed.output.find("optim.weight_decay: was 0.01, now 0.5") != std::string::npos);
  CHECK(tp::test::read_text(dir / kSecond / "history.jsonl") == second_history);
  CHECK(tp::load_checkpoint(dir / kSecond / "checkpoints" / "last.pt").step == saved.step);

  const std::string first_history = tp::test::read_text(dir / kFirst / "history.jsonl");
  const std::string first_log = tp::test::read_text(dir / kFirst / "train.log");
  const auto resumed = tp::test::run_host(sweep(dir));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(tp::test::count_of(resumed.output, "finished earlier, skipped") == 1);
  CHECK(resumed.output.find("resumed at epoch") != std::string::npos);
  CHECK(tp::test::read_text(dir / kFirst / "history.jsonl") == first_history); // not trained again
  CHECK(tp::test::read_text(dir / kFirst / "train.log") == first_log);
  CHECK(status_of(dir, kSecond) == "done");
  CHECK(tp::test::read_csv(dir / "comparison.csv").size() == 3);

  for (const std::string& cell : {kFirst, kSecond}) {
    INFO(cell);
    const auto a = tp::load_checkpoint(straight_dir / cell / "checkpoints" / "last.pt");
    const auto b = tp::load_checkpoint(dir / cell / "checkpoints" / "last.pt");
    CHECK(a.step == b.step);
    REQUIRE(a.model.size() == b.model.size());
    for (std::size_t i = 0; i < a.model.size(); ++i) {
      INFO(a.model[i].first);
      CHECK(at::equal(a.model[i].second, b.model[i].second));
    }
    CHECK(tp::test::without_timings(dir / cell) == tp::test::without_timings(straight_dir / cell));
  }
}
