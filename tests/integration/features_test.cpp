// The pipeline features around the training step, run through the real host: evaluation and
// save strategies, best-k and keep-last-k checkpoints, early stopping, load_best_at_end, the
// sanity runs (fast_dev_run, overfit_batches), the throughput meter and the recorded switches.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/monitor/history.h"

#include <toml++/toml.h>

#include "history_reader.h"
#include "host_runner.h"
#include "tp/framework/util/short_number.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using tp::test::read_history;
using tp::test::rows_of;

namespace {

tp::test::HostRun train(const fs::path& dir, const std::string& sets) {
  return tp::test::run_host("--config tests/integration/features.toml --output-dir '" + dir.string() +
                            "' --set progress.mode=\"off\" " + sets);
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("step strategies: evaluation and saves every N steps, keep-last-k and best-k files") {
  const auto dir = tp::test::fresh_dir("features_steps");
  // 512 / 32 = 16 steps per epoch, 4 epochs = 64 steps; evaluate and save every 10 steps.
  const auto run = train(dir, "--set eval.strategy=\"steps\" --set eval.every=10 --set checkpoint.strategy=\"steps\" "
                              "--set checkpoint.every=10 --set checkpoint.keep_last=2 --set checkpoint.save_top_k=3 "
                              "--set checkpoint.monitor=\"val/accuracy\" --set checkpoint.mode=\"max\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto history = read_history(dir);
  const auto evals = rows_of(history, "eval");
  std::vector<double> steps;
  for (const auto& row : evals) steps.push_back(row.values.at("step"));
  // Every 10 steps, plus the final step (64) so the run ends evaluated.
  CHECK(steps == std::vector<double>{10, 20, 30, 40, 50, 60, 64});
  // Each intermediate evaluation is on the console and in train.log too, not only in the history
  // (issue 43): step 20 is the second step of epoch 2.
  CHECK(run.output.find("step 20 (epoch 2): val/loss=") != std::string::npos);
  CHECK(tp::test::read_text(dir / "train.log").find("step 20 (epoch 2): val/loss=") != std::string::npos);
  CHECK(run.output.find("step 64 (epoch 4): val/loss=") != std::string::npos);
  CHECK(rows_of(history, "epoch").size() == 4);
  for (const auto& row : rows_of(history, "epoch")) CHECK_FALSE(row.has("val/loss")); // no epoch evaluations
  // history.csv holds the same records: the final evaluation, after the last epoch's end, too.
  const std::string csv = tp::test::read_text(dir / "history.csv");
  CHECK(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')) == history.size() + 1);  // + the header
  CHECK(csv.substr(csv.rfind('\n', csv.size() - 2) + 1).starts_with("eval,64,"));

  const auto names = files_in(dir / "checkpoints");
  INFO(std::string(names.empty() ? "" : *names.begin()));
  CHECK(names.count("last.pt") == 1);
  CHECK(names.count("step-00000064.pt") == 1); // the final save
  CHECK(names.count("step-00000060.pt") == 1);
  CHECK(names.count("step-00000050.pt") == 0); // keep_last = 2
  // best-k: the three highest accuracies among the evaluations (ties keep the earliest).
  std::vector<std::pair<double, double>> ranked; // (-accuracy, step)
  for (const auto& row : evals) ranked.emplace_back(-row.values.at("val/accuracy"), row.values.at("step"));
  std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first < b.first; });
  int best_files = 0;
  for (const auto& name : names) best_files += name.starts_with("best-step-") ? 1 : 0;
  CHECK(best_files == 3);
  for (int i = 0; i < 3; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "best-step-%08d.pt", static_cast<int>(ranked[i].second));
    CHECK_MESSAGE(names.count(name) == 1, "missing " << name);
  }
  const tp::LoadedCheckpoint best = tp::load_checkpoint(dir / "checkpoints" / "best.pt");
  CHECK(best.step == static_cast<int64_t>(ranked[0].second));
  CHECK(best.best == doctest::Approx(-ranked[0].first));
  // A mid-epoch save resumes mid-epoch: step 10 is batch 10 of epoch 0... the kept step-60 is batch 12 of epoch 3.
  const tp::LoadedCheckpoint sixty = tp::load_checkpoint(dir / "checkpoints" / "step-00000060.pt");
  CHECK(sixty.epoch == 3);
  CHECK(sixty.batch == 12);
  // The throughput meter is in every step record.
  for (const auto& row : rows_of(history, "step")) {
    CHECK(row.has("time/step_s"));
    CHECK(row.has("time/data_wait_s"));
    CHECK(row.values.at("throughput/samples_per_s") > 0);
    CHECK(row.values.at("time/data_wait_s") <= row.values.at("time/step_s"));
  }
}

TEST_CASE("early stopping stops after `patience` evaluations without improvement, on every rank's decision") {
  const auto dir = tp::test::fresh_dir("features_early_stop");
  // val/loss falls every epoch here, so watching it with mode = "max" never improves after the
  // first evaluation: patience 2 stops after evaluation 3 of 6.
  // Progress lines: the console shows the epoch's line, which the stop must follow.
  const auto run = train(dir, "--set train.epochs=6 --set early_stopping.patience=2 "
                              "--set early_stopping.mode=\"max\" --set progress.mode=\"lines\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(rows_of(read_history(dir), "epoch").size() == 3);
  const size_t stop = run.output.find("early stopping: val/loss has not improved");
  CHECK(stop != std::string::npos);
  // The epoch whose evaluation stopped the run is reported first, on the console and in train.log
  // (before: the early-stopping line came first in both).
  const size_t epoch3 = run.output.find("epoch 3/6 16/16 "); // the epoch's last line (512 / 32 steps)
  CHECK(epoch3 != std::string::npos);
  CHECK(epoch3 < stop);
  const std::string log = tp::test::read_text(dir / "train.log");
  const size_t logged_epoch = log.find("epoch 3/6 train/loss=");
  CHECK(logged_epoch != std::string::npos);
  CHECK(logged_epoch < log.find("early stopping: val/loss has not improved"));
  CHECK(run.output.find("(stopped early)") != std::string::npos);
  // Said once, in the run's closing lines (before: at the evaluation and again after "finished").
  CHECK(stop > run.output.find("finished 3 epochs"));
  CHECK(run.output.find("early stopping: val/loss has not improved", stop + 1) == std::string::npos);
  // The epoch-end save of the stopping epoch happened: last.pt resumes after epoch 3.
  const tp::LoadedCheckpoint stopped = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(stopped.epoch == 3);

  // Resumed (a requeued job's --resume auto), the run stays stopped; before, it trained epoch 4
  // and stopped again.
  const std::string sets = "--set train.epochs=6 --set early_stopping.mode=\"max\" --resume auto ";
  const auto again = train(dir, sets + "--set early_stopping.patience=2");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(again.output.find("early stopping had ended this run at step " + std::to_string(stopped.step)) != std::string::npos);
  CHECK(rows_of(read_history(dir), "epoch").size() == 3);
  CHECK(tp::load_checkpoint(dir / "checkpoints" / "last.pt").step == stopped.step);
  // A patience raised since lets it train on, until it has waited that long.
  const auto more = train(dir, sets + "--set early_stopping.patience=3");
  INFO(more.output);
  REQUIRE(more.exit_code == 0);
  CHECK(rows_of(read_history(dir), "epoch").size() == 4);

  // Stopped inside an epoch (evaluations every 6 of 16 steps: at step 12), resumed: nothing is
  // evaluated or saved again. Before, the resume evaluated step 12 a second time and rewrote
  // last.pt at "epoch 1, batch 0", so a later resume trained the epoch's first 12 batches twice.
  const auto mid_dir = tp::test::fresh_dir("features_early_stop_mid");
  const std::string mid = "--set train.epochs=3 --set early_stopping.patience=1 --set early_stopping.min_delta=100 "
                          "--set eval.strategy=\"steps\" --set eval.every=6 --set checkpoint.strategy=\"steps\" "
                          "--set checkpoint.every=6 ";
  const auto mid_run = train(mid_dir, mid);
  INFO(mid_run.output);
  REQUIRE(mid_run.exit_code == 0);
  const tp::LoadedCheckpoint at_stop = tp::load_checkpoint(mid_dir / "checkpoints" / "last.pt");
  REQUIRE(at_stop.step == 12);
  const std::size_t evals = rows_of(read_history(mid_dir), "eval").size();
  const auto mid_again = train(mid_dir, mid + "--resume auto");
  INFO(mid_again.output);
  REQUIRE(mid_again.exit_code == 0);
  const tp::LoadedCheckpoint after = tp::load_checkpoint(mid_dir / "checkpoints" / "last.pt");
  CHECK(after.step == 12);
  CHECK(after.epoch == at_stop.epoch);
  CHECK(after.batch == at_stop.batch);
  CHECK(rows_of(read_history(mid_dir), "eval").size() == evals);
}

TEST_CASE("early stopping's thresholds stop at once, min_epochs holds the stop back (Lightning's thresholds and min_epochs)") {
  // val/loss is far above 0 here: stop_above = 0 calls for a stop at the first evaluation, which
  // min_epochs = 2 holds back until the second; the checkpoint's state keeps the run stopped.
  const auto dir = tp::test::fresh_dir("features_early_stop_threshold");
  const std::string sets = "--set train.epochs=4 --set early_stopping.stop_above=0.0 --set early_stopping.min_epochs=2 ";
  const auto run = train(dir, sets);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(rows_of(read_history(dir), "epoch").size() == 2);
  CHECK(run.output.find("is above early_stopping.stop_above = 0") != std::string::npos);
  const auto again = train(dir, sets + "--resume auto");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(again.output.find("early stopping had ended this run") != std::string::npos);
  CHECK(rows_of(read_history(dir), "epoch").size() == 2);
}

TEST_CASE("the sanity check: a broken evaluation fails before the first training step, not after an epoch") {
  // top_k = 5 of 3 classes fails in the metric's update at the first evaluation. Before
  // eval.sanity_batches, that was after an epoch of training, and the epoch was lost.
  const auto dir = tp::test::fresh_dir("features_sanity_metric");
  const auto run = train(dir, "--set 'metrics[0].top_k=5'");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("sanity check: evaluating 2 batch(es) of the validation split") != std::string::npos);
  CHECK(run.output.find("org.torchhost.accuracy") != std::string::npos);
  CHECK(rows_of(read_history(dir), "step").empty()); // no step was trained
  // A monitor naming no evaluated value: refused before training, exit 2, naming the values.
  const auto monitor = train(tp::test::fresh_dir("features_sanity_monitor"),
                             "--set 'early_stopping.patience=2' --set 'early_stopping.monitor=\"val/acc\"'");
  INFO(monitor.output);
  CHECK(monitor.exit_code == 2);
  CHECK(monitor.output.find("early_stopping.monitor = \"val/acc\" is not among the evaluated values (val/loss, "
                            "val/accuracy), found by the sanity check before training") != std::string::npos);
  // Off: the first evaluation, after the first epoch, is where it fails.
  const auto off_dir = tp::test::fresh_dir("features_sanity_off");
  const auto off = train(off_dir, "--set 'metrics[0].top_k=5' --set eval.sanity_batches=0");
  INFO(off.output);
  CHECK(off.exit_code == 1);
  CHECK(off.output.find("sanity check") == std::string::npos);
  CHECK_FALSE(rows_of(read_history(off_dir), "step").empty());
  // A plugin's first call is now an evaluation's: a tensor it makes and keeps there (the loss's
  // class weights on the device) must serve training's autograd next (it failed with "Inference
  // tensors cannot be saved for backward").
  const auto weighted = train(tp::test::fresh_dir("features_sanity_weights"),
                              "--set train.epochs=1 --set 'loss.class_weights=[1.0, 2.0, 0.5]'");
  INFO(weighted.output);
  CHECK(weighted.exit_code == 0);
}

TEST_CASE("a resume whose checkpoint.mode differs re-ranks the best checkpoints: best.pt follows the new order") {
  // An older run's default "min" on val/accuracy kept the worst as best.pt; resumed with
  // mode = "auto" (max), best.pt stayed on it and load_best_at_end loaded it.
  const auto dir = tp::test::fresh_dir("features_mode_rerank");
  const std::string sets = "--set train.epochs=2 --set checkpoint.monitor=\"val/accuracy\" --set checkpoint.save_top_k=2 ";
  const auto first = train(dir, sets + "--set checkpoint.mode=\"min\"");
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const auto epochs = rows_of(read_history(dir), "epoch");
  REQUIRE(epochs.size() == 2);
  const double a1 = epochs[0].values.at("val/accuracy"), a2 = epochs[1].values.at("val/accuracy");
  REQUIRE(a1 != a2);
  const int64_t best_step = static_cast<int64_t>(epochs[a1 > a2 ? 0 : 1].values.at("step"));
  const auto again = train(dir, sets + "--resume auto");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK(tp::load_checkpoint(dir / "checkpoints" / "best.pt").step == best_step);
  CHECK(tp::test::read_text(dir / "checkpoints" / "best.tsv").find("mode max)") != std::string::npos);
}

TEST_CASE("load_best_at_end restores the best checkpoint's weights and reports its evaluation") {
  const auto dir = tp::test::fresh_dir("features_load_best");
  // "Best" = highest val/loss = the first evaluation, so the final weights are not the best ones.
  const auto run = train(dir, "--set checkpoint.mode=\"max\" --set checkpoint.load_best_at_end=true");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto epochs = rows_of(read_history(dir), "epoch");
  REQUIRE(epochs.size() == 4);
  const double first = epochs.front().values.at("val/loss");
  CHECK(first > epochs.back().values.at("val/loss"));
  CHECK(run.output.find("load_best_at_end: loaded") != std::string::npos);
  // The final report is the best checkpoint's evaluation, bit for bit the first one's.
  const std::string expected = "val/loss=" + tp::short_number(first); // as the run's last line prints it
  CHECK_MESSAGE(run.output.find(expected) != std::string::npos, "expected " << expected);
  // The history ends with that evaluation as a record of its own kind, with the step the weights
  // were saved at: an "eval" record at the last step passed the best weights' score off as the last
  // step's, to plots, scripts and host compare's "final" (experiments trial F6).
  const auto history = read_history(dir);
  REQUIRE_FALSE(history.empty());
  CHECK(history.back().kind == "best");
  CHECK(history.back().values.at("step") == epochs.back().values.at("step"));
  CHECK(history.back().values.at("best_step") == epochs.front().values.at("step"));
  CHECK(history.back().values.at("val/loss") == first);
  CHECK(rows_of(history, "eval").empty());
  // host compare: final is the last epoch's evaluation, best the best checkpoint's (which "max" of
  // val/loss makes the first epoch's).
  const auto compared = tp::test::run_host("compare '" + dir.string() + "' --output-dir '" + (dir / "cmp").string() + "'");
  INFO(compared.output);
  REQUIRE(compared.exit_code == 0);
  const std::string csv = tp::test::read_text(dir / "cmp" / "comparison.csv");
  const std::string row = csv.substr(csv.find('\n') + 1);
  CHECK(row.find("," + tp::format_number(epochs.back().values.at("val/loss")) + "," + tp::format_number(first) + ",") !=
        std::string::npos);
}

TEST_CASE("fast_dev_run: one step, one evaluation batch, nothing written") {
  const auto dir = tp::test::fresh_dir("features_fast_dev_run");
  const auto run = train(dir, "--set train.fast_dev_run=true --set train.grad_accum_steps=2");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("(1 steps)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "checkpoints"));
  CHECK_FALSE(fs::exists(dir / "history.jsonl"));
  CHECK(run.output.find("val/loss=") != std::string::npos);
}

TEST_CASE("fast_dev_run caps a warm-up longer than its one step, saying so; a real run that short is refused") {
  // configs/recipe_resnet.toml's 2000-step warm-up: a smoke test of it must run.
  const std::string warmup = "--set schedule.name=\"cosine\" --set schedule.warmup_steps=2000 ";
  const auto dir = tp::test::fresh_dir("features_fast_dev_run_warmup");
  const auto smoke = train(dir, warmup + "--set train.fast_dev_run=true");
  INFO(smoke.output);
  CHECK(smoke.exit_code == 0);
  CHECK(smoke.output.find("fast_dev_run: schedule.warmup_steps = 2000 is capped to the run's 1 optimizer step(s)") !=
        std::string::npos);
  // 4 epochs of 16 batches are 64 steps: the warm-up would never end. The refusal names the key
  // and what to change.
  const auto refused = train(tp::test::fresh_dir("features_warmup_too_long"), warmup);
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("schedule.warmup_steps: must be in [0, total optimizer steps = 64], got 2000") !=
        std::string::npos);
  CHECK(refused.output.find("Lower schedule.warmup_steps or raise train.epochs") != std::string::npos);
}

TEST_CASE("two metrics reporting one name are refused before training, naming both tables") {
  // accuracy twice, the second with top_k = 1: both report val/accuracy, and the history's records
  // held the key twice, which plots, host compare and sweeps then refused as damaged.
  const auto dir = tp::test::fresh_dir("features_duplicate_metric");
  const fs::path config = dir / "run.toml";
  std::ofstream(config) << tp::test::read_text(std::string(tp::test::source_dir()) + "/tests/integration/features.toml")
                        << "\n[[metrics]]\ncomponent = \"org.torchhost.accuracy\"\ntop_k = 1\n";
  const auto run = tp::test::run_host("--config '" + config.string() + "' --output-dir '" + (dir / "out").string() +
                                      "' --set progress.mode=\"off\"");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("metrics[0] (org.torchhost.accuracy) and metrics[1] (org.torchhost.accuracy) both report "
                        "'val/accuracy'") != std::string::npos);
  const bool history = fs::exists(dir / "out" / "history.jsonl") && fs::file_size(dir / "out" / "history.jsonl") > 0;
  CHECK_FALSE(history);  // the sanity check met it: nothing trained
}

TEST_CASE("overfit_batches: the loss on the fixed batches approaches zero") {
  const auto dir = tp::test::fresh_dir("features_overfit");
  const auto run = train(dir, "--set train.overfit_batches=2 --set train.epochs=60 --set optim.lr=1e-2 "
                              "--set train.log_every_steps=1 --set eval.every=10 --set checkpoint.strategy=\"no\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto history = read_history(dir);
  const auto steps = rows_of(history, "step");
  REQUIRE(steps.size() == 120); // 2 batches x 60 epochs
  const double first = steps.front().values.at("train/loss");
  const double last = steps.back().values.at("train/loss");
  CHECK(last < 0.02 * first);
  const auto epochs = rows_of(history, "epoch");
  CHECK(epochs.back().values.at("val/loss") < 0.05);    // validated on the same 64 samples
  CHECK(epochs.back().values.at("val/accuracy") == 1.0);
  CHECK_FALSE(fs::exists(dir / "checkpoints"));         // checkpoint.strategy = "no"
}

TEST_CASE("limit_batches: shorter training epochs the schedule counts, evaluations of a few batches (Lightning's limits)") {
  // 16 batches per epoch here: train.limit_batches = 5 makes 5 steps an epoch; eval.limit_batches
  // = 1 evaluates 32 of the 256 validation samples, which changes the values but not the training.
  const std::string sets = "--set train.epochs=2 --set train.limit_batches=5 --set train.log_every_steps=1 "
                           "--set checkpoint.strategy=\"no\" ";
  const auto dir = tp::test::fresh_dir("features_limit_batches");
  const auto limited = train(dir, sets + "--set eval.limit_batches=1");
  INFO(limited.output);
  REQUIRE(limited.exit_code == 0);
  CHECK(limited.output.find("over 10 optimizer steps") != std::string::npos);
  const auto full_dir = tp::test::fresh_dir("features_limit_batches_full_eval");
  const auto full = train(full_dir, sets);
  INFO(full.output);
  REQUIRE(full.exit_code == 0);
  const auto limited_history = read_history(dir), full_history = read_history(full_dir);
  const auto steps = rows_of(limited_history, "step"), full_steps = rows_of(full_history, "step");
  REQUIRE(steps.size() == 10);
  REQUIRE(full_steps.size() == 10);
  for (std::size_t i = 0; i < steps.size(); ++i)
    CHECK(steps[i].values.at("train/loss") == full_steps[i].values.at("train/loss"));
  const auto epochs = rows_of(limited_history, "epoch"), full_epochs = rows_of(full_history, "epoch");
  REQUIRE(epochs.size() == 2);
  REQUIRE(full_epochs.size() == 2);
  CHECK(epochs.back().values.at("val/loss") != full_epochs.back().values.at("val/loss"));
}

TEST_CASE("speed switches are explicit and recorded in runtime.toml; channels_last trains") {
  const auto dir = tp::test::fresh_dir("features_switches");
  const auto run = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                      "' --set progress.mode=\"off\" --set train.epochs=1 --set run.channels_last=true "
                                      "--set data.train.size=256 --set data.train.val_size=128 --set run.device=\"cpu\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string runtime = tp::test::read_text(dir / "runtime.toml");
  CHECK(runtime.find("channels_last = true") != std::string::npos);
  CHECK(runtime.find("cudnn_benchmark = false") != std::string::npos);
  CHECK(runtime.find("tf32 = false") != std::string::npos);
  const auto epochs = rows_of(read_history(dir), "epoch");
  REQUIRE(epochs.size() == 1);
  CHECK(std::isfinite(epochs.back().values.at("val/loss")));
}

TEST_CASE("optim.lr_base trains at the lr of this run's global batch, logged and recorded in runtime.toml") {
  // timm's --lr-base: sgd's linear rule, 0.05 x (16 x 1 rank x 2 accumulated) / 256 = 0.00625.
  const auto dir = tp::test::fresh_dir("features_lr_base");
  std::ofstream(dir / "run.toml") << "[run]\ndevice = \"cpu\"\nseed = 3\nthreads = 1\n"
                                     "[train]\nepochs = 1\nbatch_size = 16\ngrad_accum_steps = 2\nlog_every_steps = 1\n"
                                     "[optim]\nname = \"sgd\"\nlr_base = 0.05\n"
                                     "[data.train]\ncomponent = \"org.torchhost.shapes\"\nsize = 64\nval_size = 16\n"
                                     "image_size = 32\naugment = false\n"
                                     "[model]\ncomponent = \"org.torchhost.mlp\"\nhidden = [8]\n"
                                     "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n"
                                     "[progress]\nmode = \"off\"\n[plots]\nenabled = false\n";
  const auto run = tp::test::run_host("--config '" + (dir / "run.toml").string() + "' --output-dir '" + (dir / "out").string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("optim.lr = 0.00625: optim.lr_base 0.05 x (global batch 32 / lr_base_size 256) (linear") !=
        std::string::npos);
  const toml::table runtime = toml::parse_file((dir / "out" / "runtime.toml").string());
  CHECK(runtime["optim_lr"].value<double>() == 0.05 * 32 / 256);
  const auto steps = rows_of(read_history(dir / "out"), "step");
  REQUIRE(!steps.empty());
  CHECK(steps.front().values.at("lr") == doctest::Approx(0.00625).epsilon(1e-12));
  // config.toml keeps lr_base and no lr: the same file on more ranks scales again.
  const std::string config = tp::test::read_text(dir / "out" / "config.toml");
  CHECK(config.find("lr_base = 0.05") != std::string::npos);
  const auto rerun = tp::test::run_host("--config '" + (dir / "out" / "config.toml").string() + "' --output-dir '" +
                                        (dir / "again").string() + "' --set train.batch_size=32");
  INFO(rerun.output);
  CHECK(rerun.exit_code == 0);
  CHECK(rerun.output.find("optim.lr = 0.0125: optim.lr_base 0.05 x (global batch 64") != std::string::npos);
}
