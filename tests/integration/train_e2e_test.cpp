// End to end: the quickstart config trains through the real host and plugins; the history says
// the loss fell and accuracy passed a threshold; checkpoints load; `host eval` agrees.
#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/load.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using Record = std::map<std::string, double>;

// history.jsonl holds flat objects of numbers plus "kind"; a tiny reader is enough here.
std::vector<Record> epoch_records(const std::filesystem::path& file) {
  std::vector<Record> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"kind\":\"epoch\"") == std::string::npos) continue;
    Record r;
    std::size_t pos = 0;
    while ((pos = line.find("\"", pos)) != std::string::npos) {
      const std::size_t end = line.find("\"", pos + 1);
      const std::string key = line.substr(pos + 1, end - pos - 1);
      if (line[end + 1] != ':') break;
      const std::size_t value_end = line.find_first_of(",}", end + 2);
      const std::string value = line.substr(end + 2, value_end - end - 2);
      if (!value.empty() && value[0] != '"' && value != "null") r[key] = std::stod(value);
      pos = value_end;
    }
    records.push_back(r);
  }
  return records;
}

}  // namespace

TEST_CASE("quickstart config trains small_cnn on shapes: loss falls, accuracy passes 90%") {
  const auto dir = tp::test::fresh_dir("e2e_quickstart");
  // Two epochs of 46 steps: val/accuracy is about 0.99 after the second (1.0 after a third, which
  // the thresholds do not need; each epoch costs about 7 s here and 20 s in the sanitizer gate).
  const auto run = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                      "' --set train.epochs=2 --set data.train.size=3000 --set progress.mode=\"lines\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("Outputs in") != std::string::npos);
  CHECK(run.output.find("best.pt (best val/accuracy)") != std::string::npos);
  CHECK(run.output.find("plots/*.png") != std::string::npos);
  CHECK(run.output.find("  report.toml ") != std::string::npos); // the summary lists it (docs trial F11)
  CHECK(run.output.find("  run.id ") != std::string::npos);

  const auto epochs = epoch_records(dir / "history.jsonl");
  REQUIRE(epochs.size() == 2);
  CHECK(epochs.back().at("train/loss") < 0.5 * epochs.front().at("train/loss"));
  CHECK(epochs.back().at("val/accuracy") >= 0.90);
  CHECK(epochs.back().at("val/f1") >= 0.85);
  CHECK(epochs.back().at("step") == doctest::Approx(2 * (3000 / 64))); // drop_last: 46 steps/epoch

  for (const char* file : {"config.toml", "train.log", "history.csv", "checkpoints/last.pt", "checkpoints/best.pt"})
    CHECK_MESSAGE(std::filesystem::exists(dir / file), file);

  // The resolved config reloads to the same run (round trip of what the run really used).
  const tp::RunConfig again = tp::load_run_config(dir / "config.toml", {}, {});
  CHECK(again.train.epochs == 2);
  CHECK(again.data.train.options["size"].value<int64_t>() == 3000);

  // The checkpoint names the epoch and holds every model tensor.
  const tp::LoadedCheckpoint last = tp::load_checkpoint(dir / "checkpoints/last.pt");
  CHECK(last.epoch == 2);
  CHECK(last.step == 2 * (3000 / 64));
  CHECK(last.model.size() > 4);
  CHECK(last.plugins.size() >= 4);

  // `host eval` on best.pt reproduces the best epoch's validation accuracy.
  const auto eval = tp::test::run_host("eval --config configs/quickstart.toml --output-dir '" + dir.string() +
                                       "' --set data.train.size=3000 --checkpoint best");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  double best_accuracy = 0;
  for (const auto& e : epochs) best_accuracy = std::max(best_accuracy, e.at("val/accuracy"));
  const std::string json = tp::test::read_text(dir / "eval_best.json");
  const auto at = json.find("\"val/accuracy\":");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(json.substr(at + 15)) == doctest::Approx(best_accuracy).epsilon(1e-6));
}

TEST_CASE("the plain-C dataset plugin trains a linear model through the host") {
  const auto dir = tp::test::fresh_dir("e2e_c_plugin");
  const auto run = tp::test::run_host("--config tests/integration/c_regression.toml --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                      "' --set progress.mode=\"off\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto epochs = epoch_records(dir / "history.jsonl");
  REQUIRE(!epochs.empty());
  CHECK(epochs.back().at("val/loss") < 1e-3); // y = w.x + b is exactly learnable by a linear model
  CHECK(epochs.back().at("val/loss") < 0.01 * epochs.front().at("train/loss"));
}

TEST_CASE("one-input/two-output and two-input/two-output configs run through the ABI: both heads' losses and metrics") {
  // The sanitizer gate's pass over the multi-input and multi-output paths (fields split per
  // input, outputs per head, weighted_sum's terms, a metric on the second head): a short epoch.
  // That both heads learn is heads_learn_test.cpp's, outside the gate: its epochs cost 150 s
  // under the sanitizers and check numbers, not memory.
  for (const std::string name : {"multi_output", "multi_input"}) {
    const auto dir = tp::test::fresh_dir("e2e_short_" + name);
    const auto run = tp::test::run_host("--config configs/" + name + ".toml --output-dir '" + dir.string() +
                                        "' --set train.epochs=1 --set data.train.size=256 --set data.train.val_size=96 "
                                        "--set train.batch_size=32 --set progress.mode=\"off\"");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const auto epochs = epoch_records(dir / "history.jsonl");
    REQUIRE(epochs.size() == 1);
    for (const char* key : {"train/loss", "train/loss/logits", "train/loss/bbox", "val/loss/bbox", "val/accuracy", "val/mae"}) {
      INFO(key);
      REQUIRE(epochs[0].count(key) == 1);
      CHECK(std::isfinite(epochs[0].at(key)));
    }
    CHECK(epochs[0].at("step") == 256 / 32);
  }
}

TEST_CASE("checkpoints load in Python with torch.load(weights_only=True); export gives the same state_dict") {
  const auto dir = tp::test::fresh_dir("e2e_export");
  const auto run = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                      "' --set train.epochs=1 --set data.train.size=640 --set progress.mode=\"off\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto checkpoint = dir / "checkpoints" / "last.pt";
  const auto exported = dir / "model.safetensors";
  const auto export_run = tp::test::run_host("export --checkpoint '" + checkpoint.string() +
                                             "' --format safetensors --output '" + exported.string() + "'");
  INFO(export_run.output);
  REQUIRE(export_run.exit_code == 0);
  // Python is the oracle: the safetensors file holds exactly the checkpoint's model tensors.
  const std::string script =
      "import torch\nfrom safetensors.torch import load_file\n"
      "c = torch.load('" + checkpoint.string() + "', weights_only=True)\n"
      "w = load_file('" + exported.string() + "')\n"
      "assert c['format'] == 'torchhost-checkpoint/1' and c['epoch'] == 1 and c['batch'] == 0\n"
      "assert list(w) == list(c['model']) or set(w) == set(c['model'])\n"
      "assert all(torch.equal(w[k], c['model'][k]) for k in w)\n"
      "print('python-ok', len(w), c['step'])\n";
  const auto script_file = dir / "check.py";
  std::ofstream(script_file) << script;
  const auto python = tp::test::run_shell(std::string("'") + tp::test::python() + "' '" + script_file.string() + "'");
  INFO(python.output);
  CHECK(python.exit_code == 0);
  CHECK(python.output.find("python-ok 20 10") != std::string::npos);
}

TEST_CASE("two runs with the same seed and run.deterministic give identical checkpoints") {
  std::vector<tp::LoadedCheckpoint> runs;
  for (const char* name : {"determinism_a", "determinism_b"}) {
    const auto dir = tp::test::fresh_dir(name);
    const auto run = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                        "' --set train.epochs=1 --set data.train.size=640 --set data.num_workers=2 "
                                        "--set run.deterministic=true --set progress.mode=\"off\"");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(tp::test::read_text(dir / "train.log").find("deterministic algorithms: on") != std::string::npos);
    runs.push_back(tp::load_checkpoint(dir / "checkpoints" / "last.pt"));
  }
  REQUIRE(runs[0].model.size() == runs[1].model.size());
  for (std::size_t i = 0; i < runs[0].model.size(); ++i) {
    INFO(runs[0].model[i].first);
    CHECK(at::equal(runs[0].model[i].second, runs[1].model[i].second));
  }
}

// A trial's run without evaluation and plots was told it had written best.pt and plots/*.png.
TEST_CASE("the end-of-run outputs list names only what the run wrote") {
  const auto dir = tp::test::fresh_dir("e2e_outputs_list");
  const auto run = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                      "' --set train.epochs=1 --set data.train.size=256 --set progress.mode=\"off\" "
                                      "--set eval.strategy=\"no\" --set plots.enabled=false");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("Outputs in") != std::string::npos);
  CHECK(run.output.find("last.pt (resume point)") != std::string::npos);
  CHECK(run.output.find("best.pt") == std::string::npos);
  CHECK(run.output.find("plots/*.png") == std::string::npos);
}
