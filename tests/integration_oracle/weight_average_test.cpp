// [ema] end to end (docs/weight_averaging.md), with the real `host`:
// - PyTorch's torch.optim.swa_utils.AveragedModel (ema_oracle.py, run with tp::test::python()) fed the
//   host's live weights of every step reproduces the host's average after 50 steps to 1e-6
//   relative: plain decay, timm's warmup, every_steps = 2 with buffers copied;
// - the average is evaluated as val_ema/* and checkpoint.monitor may name it;
// - `host eval --weights ema` reproduces the logged val_ema/loss and `host export --weights ema`
//   writes the checkpoint's average; a checkpoint without one is refused with exit 2; without
//   --weights, eval and export take the weights checkpoint.monitor measured (val_ema/...: ema);
// - a run stopped by SIGTERM and resumed ends with the average bitwise equal to a straight run's.
#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/safetensors.h"

#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

const std::string kConfig = "--config tests/integration_oracle/ema.toml ";

tp::test::HostRun train(const std::filesystem::path& dir, const std::string& sets) {
  auto run = tp::test::run_host(kConfig + "--output-dir '" + dir.string() + "' " + sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return run;
}

/// Runs ema_oracle.py on `dir`; returns (max relative difference, tensors compared, ints equal).
std::tuple<double, int, bool> oracle(const std::filesystem::path& dir, const std::string& decay, const std::string& warmup,
                                     int every, const std::string& buffers) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()), "the oracle needs the project venv: " << tp::test::python());
  const auto run = tp::test::run_shell(std::string("'") + tp::test::python() + "' tests/integration_oracle/ema_oracle.py '" +
                                       dir.string() + "' " + decay + " " + warmup + " " + std::to_string(every) + " " +
                                       buffers);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::istringstream in(run.output);
  std::string tag;
  double diff = 1.0;
  int compared = 0, ints_equal = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    fields >> tag;
    if (tag == "diff") fields >> diff >> compared;
    if (tag == "int_equal") fields >> ints_equal;
  }
  return {diff, compared, ints_equal == 1};
}

}  // namespace

TEST_CASE("the host's EMA equals torch.optim.swa_utils.AveragedModel fed the same weights (50 steps)") {
  struct Variant {
    const char* name;
    std::string sets;
    const char* warmup;
    int every;
    const char* buffers;
  };
  const Variant variants[] = {
      {"decay", "", "false", 1, "average"},
      {"warmup", "--set ema.warmup=true --set ema.decay=0.99", "true", 1, "average"},
      {"every2_copy", "--set ema.every_steps=2 --set ema.buffers=\"copy\"", "false", 2, "copy"},
  };
  for (const Variant& v : variants) {
    const auto dir = tp::test::fresh_dir(std::string("ema_oracle_") + v.name);
    const auto run = train(dir, v.sets);
    CHECK(run.output.find("ema: decay") != std::string::npos);
    const std::string decay = v.sets.find("0.99") != std::string::npos ? "0.99" : "0.9";
    const auto [diff, compared, ints_equal] = oracle(dir, decay, v.warmup, v.every, v.buffers);
    MESSAGE("ema oracle " << std::string(v.name) << ": max relative difference " << diff << " over " << compared << " tensors");
    CHECK(compared >= 10); // small_cnn: convolution, BatchNorm and linear weights and statistics
    CHECK(diff <= 1e-6);
    CHECK(ints_equal);
    // The average moved away from the live weights (a check that could not pass by copying).
    const auto last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
    REQUIRE(last.average("ema") != nullptr);
    CHECK_FALSE(at::equal(last.average("ema")->weights.front().second, last.model.front().second));
  }
}

TEST_CASE("val_ema/* is evaluated and monitored; host eval and export take --weights ema") {
  const auto dir = tp::test::fresh_dir("ema_eval");
  train(dir, "--set checkpoint.strategy=\"epoch\" --set checkpoint.save_top_k=1 "
             "--set checkpoint.monitor=\"val_ema/loss\" --set checkpoint.mode=\"min\"");
  const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
  REQUIRE(epochs.size() == 1);
  REQUIRE(epochs[0].has("val_ema/loss"));
  REQUIRE(epochs[0].has("val_ema/accuracy"));
  CHECK(epochs[0].values.at("val_ema/loss") != epochs[0].values.at("val/loss"));
  const auto best = tp::load_checkpoint(dir / "checkpoints" / "best.pt");
  CHECK(best.monitor == "val_ema/loss");
  CHECK(best.best == doctest::Approx(epochs[0].values.at("val_ema/loss")).epsilon(1e-9));

  // host eval recomputes the logged value from the checkpoint's average.
  const auto eval = tp::test::run_host("eval --config '" + (dir / "config.toml").string() +
                                       "' --checkpoint last --weights ema");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  std::ifstream json(dir / "eval_last_ema.json");
  REQUIRE(json.good());
  const std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  const std::size_t at = text.find("\"val/loss\":");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(text.substr(at + 11)) == doctest::Approx(epochs[0].values.at("val_ema/loss")).epsilon(1e-6));

  // Issue 58, item 17: without --weights, host eval scores the weights the monitor measured (it
  // scored the live ones, which chose nothing), says so, and logs nothing about training.
  const auto by_default = tp::test::run_host("eval --config '" + (dir / "config.toml").string() + "' --checkpoint best");
  INFO(by_default.output);
  REQUIRE(by_default.exit_code == 0);
  CHECK(by_default.output.find("weights: ema, the ones the run's checkpoint.monitor (val_ema/loss) measured; "
                               "--weights live for the trained weights") != std::string::npos);
  CHECK(by_default.output.find("evaluation of the ema weights of") != std::string::npos);
  for (const char* training_only : {"schedule ", "precision", "training order", "ema: decay", "data.decode: train"})
    CHECK_MESSAGE(by_default.output.find(training_only) == std::string::npos, training_only);
  const auto metric = [&](const std::string& file) {
    const std::string json = tp::test::read_text(dir / file);
    const std::size_t at = json.find("\"val/loss\":");
    REQUIRE(at != std::string::npos);
    return std::stod(json.substr(at + 11));
  };
  CHECK(metric("eval_best_ema.json") == doctest::Approx(epochs[0].values.at("val_ema/loss")).epsilon(1e-6));
  const auto live = tp::test::run_host("eval --config '" + (dir / "config.toml").string() +
                                       "' --checkpoint best --weights live");
  INFO(live.output);
  REQUIRE(live.exit_code == 0);
  CHECK(live.output.find("weights: ") == std::string::npos);
  CHECK(metric("eval_best.json") == doctest::Approx(epochs[0].values.at("val/loss")).epsilon(1e-6));

  // host export writes the average, named as the model.
  const auto out = dir / "ema.safetensors";
  // Without --weights too: the run monitored them.
  const auto exported = tp::test::run_host("export --checkpoint '" + (dir / "checkpoints" / "last.pt").string() +
                                           "' --format safetensors --output '" + out.string() + "'");
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);
  CHECK(exported.output.find("(ema weights)") != std::string::npos);
  std::ifstream file(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto tensors = tp::read_safetensors(bytes);
  const auto last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  const auto& ema = last.average("ema")->weights;
  REQUIRE(tensors.size() == ema.size());
  for (std::size_t i = 0; i < ema.size(); ++i) {
    CHECK(tensors[i].first == ema[i].first);
    CHECK(at::equal(tensors[i].second, ema[i].second));
  }
}

TEST_CASE("--weights ema on a checkpoint without an average is a clear configuration error") {
  const auto dir = tp::test::fresh_dir("ema_absent");
  train(dir, "--set ema.enabled=false --set checkpoint.strategy=\"epoch\"");
  const auto out = tp::test::run_host("export --checkpoint '" + (dir / "checkpoints" / "last.pt").string() +
                                      "' --weights ema --format safetensors --output '" + (dir / "x.safetensors").string() + "'");
  INFO(out.output);
  CHECK(out.exit_code == 2);
  CHECK(out.output.find("holds no 'ema' weights") != std::string::npos);
}

TEST_CASE("SIGTERM and --resume auto: the average continues bitwise-exactly") {
  const std::string sets = "--set checkpoint.strategy=\"epoch\" --set train.epochs=4 --set train.log_every_steps=2 ";
  const auto straight_dir = tp::test::fresh_dir("ema_resume_straight");
  train(straight_dir, sets);
  const auto dir = tp::test::fresh_dir("ema_resume_interrupted");
  const auto interrupted =
      tp::test::run_host_until_history(kConfig + sets + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 20);
  INFO(interrupted.output);
  REQUIRE(interrupted.output.find("exit=143") != std::string::npos);
  const auto saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(saved.step > 0);
  CHECK(saved.step < 200);
  train(dir, sets + "--resume auto");
  const auto a = tp::load_checkpoint(straight_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  REQUIRE(a.average("ema") != nullptr);
  REQUIRE(b.average("ema") != nullptr);
  CHECK(a.step == b.step);
  CHECK(a.average("ema")->updates == b.average("ema")->updates);
  const auto& wa = a.average("ema")->weights;
  const auto& wb = b.average("ema")->weights;
  REQUIRE(wa.size() == wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i) {
    INFO(wa[i].first);
    CHECK(at::equal(wa[i].second, wb[i].second));
  }
}

TEST_CASE("[swa] follows PyTorch's SWALR, AveragedModel and update_bn (swa_oracle.py)") {
  const auto dir = tp::test::fresh_dir("swa_oracle");
  // torchscript_oracle.py writes mlp.pt (Linear - BatchNorm1d - ReLU - Linear) among its modules.
  const auto script = tp::test::run_shell(std::string("'") + tp::test::python() +
                                          "' tests/plugins/models/torchscript_oracle.py script '" + dir.string() + "'");
  INFO(script.output);
  REQUIRE(script.exit_code == 0);
  const auto run = tp::test::run_host("--config tests/integration_oracle/swa.toml --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                      "' --set 'model.path=\"" + (dir / "mlp.pt").string() + "\"'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("BatchNorm statistics of 1 layer(s) recomputed") != std::string::npos);

  const auto oracle = tp::test::run_shell(std::string("'") + tp::test::python() + "' tests/integration_oracle/swa_oracle.py '" +
                                          dir.string() + "' 0.05 0.01 2 cos 2");
  INFO(oracle.output);
  REQUIRE(oracle.exit_code == 0);
  std::istringstream lines(oracle.output);
  std::map<std::string, std::pair<double, double>> found;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string tag;
    double diff = 1, count = 0;
    fields >> tag >> diff >> count;
    found[tag] = {diff, count};
    MESSAGE("swa oracle: " << line);
  }
  REQUIRE(found.count("lr") == 1);
  CHECK(found["lr"].first <= 1e-12);
  CHECK(found["lr"].second == 3 * 8); // epochs 2-4, 8 steps each
  CHECK(found["average"].first <= 1e-6);
  CHECK(found["average"].second == 2);
  CHECK(found["update_bn"].first <= 1e-5);
  CHECK(found["update_bn"].second == 8);

  // val_swa/* appears from the first averaged epoch on.
  const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
  REQUIRE(epochs.size() == 4);
  CHECK_FALSE(epochs[0].has("val_swa/loss"));
  CHECK(epochs[1].has("val_swa/loss"));
  // The final evaluation, of the averaged weights after update_bn, is in the history: an "eval"
  // record at the last step (before, only the log's last line had it, and `host compare` read
  // the epoch record's older value as the run's final one).
  const auto evals = tp::test::rows_of(tp::test::read_history(dir), "eval");
  REQUIRE(evals.size() == 1);
  CHECK(evals[0].values.at("step") == epochs.back().values.at("step"));
  CHECK(evals[0].values.at("epoch") == 3); // 0-based, as step records: the last epoch's index
  CHECK(evals[0].has("val/loss"));
  CHECK(run.output.find("step " + std::to_string(static_cast<int64_t>(epochs.back().values.at("step"))) +
                        " (epoch 4):") != std::string::npos);
}

TEST_CASE("[swa] without swa.lr, or starting after the last epoch, is refused with exit 2") {
  const auto dir = tp::test::fresh_dir("swa_refused");
  const auto no_lr = tp::test::run_host(kConfig + "--output-dir '" + dir.string() + "' --set swa.enabled=true");
  INFO(no_lr.output);
  CHECK(no_lr.exit_code == 2);
  CHECK(no_lr.output.find("swa.lr") != std::string::npos);
  const auto late = tp::test::run_host(kConfig + "--output-dir '" + dir.string() +
                                       "' --set swa.enabled=true --set swa.lr=0.01 --set swa.start_epoch=3");
  INFO(late.output);
  CHECK(late.exit_code == 2);
  CHECK(late.output.find("swa.start_epoch") != std::string::npos);
}
