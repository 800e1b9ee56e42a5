// host sweep: the product of the grid, one run directory per cell, sweep.toml, the comparison
// written into the sweep directory, a rerun that skips finished cells, and grid mistakes refused
// before anything trains.
#include <toml++/toml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "experiment_helpers.h"
#include "tp/framework/error.h"
#include "integration/history_reader.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using tp::test::column;
using tp::test::count_of;

namespace {

// The grid order: the first --grid varies slowest.
const std::vector<std::string> kCells{"optim.lr=0.003,train.batch_size=16", "optim.lr=0.003,train.batch_size=32",
                                      "optim.lr=0.01,train.batch_size=16", "optim.lr=0.01,train.batch_size=32"};

std::string sweep(const fs::path& dir, const std::string& grid) {
  return "sweep " + tp::test::kTiny + grid + " --output-dir '" + dir.string() + "'";
}

}  // namespace

TEST_CASE("a 2x2 sweep trains four cells, records them and writes the comparison; a rerun skips them") {
  const auto dir = tp::test::fresh_dir("sweep_grid");
  const std::string command = sweep(dir, "--grid optim.lr=0.003,0.01 --grid train.batch_size=16,32");
  const auto run = tp::test::run_host(command);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);

  // Each cell trained with its own values, into its own directory.
  const toml::table record = toml::parse_file((dir / "sweep.toml").string());
  const toml::array& cells = *record["cells"].as_array();
  REQUIRE(cells.size() == 4);
  for (std::size_t i = 0; i < kCells.size(); ++i) {
    INFO(kCells[i]);
    CHECK(cells[i].as_table()->at("name").value<std::string>() == kCells[i]);
    CHECK(cells[i].as_table()->at("status").value<std::string>() == "done");
    const toml::table config = toml::parse_file((dir / kCells[i] / "config.toml").string());
    CHECK(config["optim"]["lr"].value<double>() == (i < 2 ? 0.003 : 0.01));
    CHECK(config["train"]["batch_size"].value<int64_t>() == (i % 2 == 0 ? 16 : 32));
    CHECK(config["run"]["seed"].value<int64_t>() == 11); // one seed for every cell
    CHECK(fs::exists(dir / kCells[i] / "report.toml"));
  }

  // The comparison: one row per cell in grid order, exactly the two grid keys as config columns.
  const auto csv = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(csv.size() == 5);
  const auto& header = csv[0];
  REQUIRE(header.size() >= 4);
  CHECK(header[0] == "run");
  CHECK(header[1] == "optim.lr");
  CHECK(header[2] == "train.batch_size");
  CHECK(header[3] == "final val/accuracy");
  const int steps = column(header, "steps");
  REQUIRE(steps >= 0);
  for (std::size_t i = 0; i < kCells.size(); ++i) {
    const auto& row = csv[i + 1];
    REQUIRE(row.size() == header.size());
    CHECK(row[0] == kCells[i]);
    CHECK(row[1] == (i < 2 ? "0.003" : "0.01"));
    CHECK(row[2] == (i % 2 == 0 ? "16" : "32"));
    // 256 samples: 16 steps per epoch at batch 16, 8 at batch 32; two epochs.
    CHECK(row[static_cast<std::size_t>(steps)] == (i % 2 == 0 ? "32" : "16"));
  }
  CHECK(count_of(tp::test::read_text(dir / "comparison.md"), "\n|") == 5); // header rule and four rows
  for (const char* png : {"comparison_loss_step.png", "comparison_loss_time.png", "comparison_val_accuracy_step.png",
                          "comparison_val_accuracy_time.png"})
    CHECK(fs::file_size(dir / png) > 1000);
  CHECK(run.output.find("final val/accuracy") != std::string::npos); // the table on stdout

  // A cell trained by a host that did not have a key yet (its config.toml lacks it) counts as
  // trained with the key's default: the rerun skips it and the comparison gets no column for it.
  const fs::path old_config = dir / kCells[0] / "config.toml";
  std::string text = tp::test::read_text(old_config);
  const std::size_t line = text.find("init_weights_prefix = ''\n");
  REQUIRE(line != std::string::npos);
  std::ofstream(old_config, std::ios::trunc) << text.erase(line, text.find('\n', line) + 1 - line);

  // A rerun trains nothing: every cell is skipped and its files stay as they were.
  const std::string history_before = tp::test::read_text(dir / kCells[0] / "history.jsonl");
  const std::string log_before = tp::test::read_text(dir / kCells[3] / "train.log");
  const auto again = tp::test::run_host(command);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(count_of(again.output, "finished earlier, skipped") == 4);
  CHECK(tp::test::read_text(dir / kCells[0] / "history.jsonl") == history_before);
  CHECK(tp::test::read_text(dir / kCells[3] / "train.log") == log_before);
  CHECK(tp::test::read_csv(dir / "comparison.csv")[0][3] == "final val/accuracy");
}

TEST_CASE("grid mistakes fail before any cell trains, naming the key") {
  SUBCASE("an unknown host key") {
    const auto dir = tp::test::fresh_dir("sweep_bad_key");
    const auto run = tp::test::run_host(sweep(dir / "sweep", "--grid optim.lr=0.003,0.01 --grid train.batch_sise=16,32"));
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(run.output.find("train.batch_sise") != std::string::npos);
    CHECK(run.output.find("did you mean 'train.batch_size'") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "sweep"));
  }
  SUBCASE("a bad value in a later cell") {
    const auto dir = tp::test::fresh_dir("sweep_bad_value");
    const auto run = tp::test::run_host(sweep(dir / "sweep", "--grid optim.lr=0.003,0.01 --grid amp.precision=fp32,fp61"));
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(run.output.find("amp.precision=fp61") != std::string::npos); // the cell
    CHECK(run.output.find("Nothing was trained") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "sweep"));
  }
  SUBCASE("a --set on a grid's key, which every cell would override") {
    const auto dir = tp::test::fresh_dir("sweep_set_and_grid");
    const auto run = tp::test::run_host(sweep(dir / "sweep", "--grid optim.lr=0.003,0.01 --set optim.lr=0.1"));
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(run.output.find("--set optim.lr=0.1 and the grid both set optim.lr") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "sweep"));
    // The sweep places every cell itself: a grid over run.output_dir would train one cell twice.
    const auto placed = tp::test::run_host(sweep(dir / "sweep", "--grid run.output_dir=a,b"));
    INFO(placed.output);
    CHECK(placed.exit_code == tp::kExitConfig);
    CHECK(placed.output.find("the grid sets run.output_dir") != std::string::npos);
  }
  SUBCASE("one value written twice (1e-3 and 0.001)") {
    const auto dir = tp::test::fresh_dir("sweep_same_value");
    const auto run = tp::test::run_host(sweep(dir / "sweep", "--grid optim.lr=1e-3,0.003,0.001"));
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(run.output.find("'1e-3' and '0.001' are the same value") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "sweep"));
  }
  SUBCASE("a schedule a later cell cannot build (step without step_size)") {
    const auto dir = tp::test::fresh_dir("sweep_bad_schedule");
    const auto run = tp::test::run_host(sweep(dir / "sweep", "--grid schedule.name=cosine,step"));
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(run.output.find("schedule.name=step") != std::string::npos);  // the cell
    CHECK(run.output.find("step_size >= 1") != std::string::npos);
    CHECK(run.output.find("Nothing was trained") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "sweep"));
  }
  SUBCASE("an unknown key of a component") {
    const auto dir = tp::test::fresh_dir("sweep_bad_component_key");
    const auto run = tp::test::run_host(sweep(dir / "sweep", "--grid model.hiden=[16],[32]"));
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitConfig);
    CHECK(run.output.find("unknown key 'hiden'") != std::string::npos);
    // The first cell's component tables are checked as the plugins load: named like the others
    // (docs trial F17).
    CHECK(run.output.find("the cell 'model.hiden=_16_' (--set model.hiden=[16])") != std::string::npos);
    CHECK(run.output.find("Nothing was trained") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "sweep"));
  }
}

TEST_CASE("the precision experiment's command line: keys changed together form one axis") {
  // configs/precision_experiment.toml's CPU command, on a sliver of its data.
  const auto dir = tp::test::fresh_dir("sweep_precision");
  const auto run = tp::test::run_host(
      "sweep --config configs/precision_experiment.toml --grid amp.precision=fp32,bf16 "
      "--grid 'train.batch_size+train.grad_accum_steps=[64,1],[16,4]' --set data.train.size=128 "
      "--set data.train.val_size=64 --set train.epochs=1 --set progress.mode=\"off\" --output-dir '" +
      dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto csv = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(csv.size() == 5);
  CHECK(std::vector<std::string>(csv[0].begin(), csv[0].begin() + 5) ==
        std::vector<std::string>{"run", "amp.precision", "train.batch_size", "train.grad_accum_steps",
                                 "final val/accuracy"});
  const std::vector<std::string> names{"amp.precision=fp32,train.batch_size=64,train.grad_accum_steps=1",
                                       "amp.precision=fp32,train.batch_size=16,train.grad_accum_steps=4",
                                       "amp.precision=bf16,train.batch_size=64,train.grad_accum_steps=1",
                                       "amp.precision=bf16,train.batch_size=16,train.grad_accum_steps=4"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    CHECK(csv[i + 1][0] == names[i]);
    const toml::table config = toml::parse_file((dir / names[i] / "config.toml").string());
    CHECK(config["amp"]["precision"].value<std::string>() == (i < 2 ? "fp32" : "bf16"));
    CHECK(config["train"]["batch_size"].value<int64_t>() == (i % 2 == 0 ? 64 : 16));
    CHECK(config["train"]["grad_accum_steps"].value<int64_t>() == (i % 2 == 0 ? 1 : 4));
    // 128 samples: two batches of 64, or two windows of four micro-batches of 16.
    CHECK(csv[i + 1][static_cast<std::size_t>(column(csv[0], "steps"))] == "2");
  }
}

TEST_CASE("a second host sweep on the same directory is refused at once, and the first goes on undisturbed") {
  const auto dir = tp::test::fresh_dir("sweep_twice");
  const fs::path history = dir / "optim.lr=0.003" / "history.jsonl";
  const std::string command = "'" + std::string(tp::test::build_dir()) + "/bin/host' " +
                              sweep(dir, "--grid optim.lr=0.003 --set data.train.size=32768");
  // The second starts once the first one's cell has logged a step (the first holds the lock by
  // then, and its 2,048 steps take seconds); afterwards SIGTERM ends the first, whose cell saves.
  const auto run = tp::test::run_shell(command + " >'" + (dir / "first.log").string() + "' 2>&1 & pid=$!; " +
                                       "for i in $(seq 1 3000); do [ -s '" + history.string() + "' ] && break; " +
                                       "sleep 0.02; done; " + command + "; echo \"second=$?\"; kill -TERM $pid; " +
                                       "wait $pid; echo \"first=$?\"");
  INFO(run.output);
  INFO(tp::test::read_text(dir / "first.log"));
  CHECK(run.output.find("second=1") != std::string::npos);
  CHECK(run.output.find("host sweep: another sweep is running in " + dir.string() + " (pid ") != std::string::npos);
  CHECK(run.output.find("give this sweep another --output-dir") != std::string::npos);
  CHECK(count_of(run.output, "host sweep: [1/1]") == 0); // the second never started a cell
  CHECK(run.output.find("first=143") != std::string::npos);
  const toml::table record = toml::parse_file((dir / "sweep.toml").string());
  CHECK(record["cells"][0]["status"].value<std::string>() == "interrupted");
  // The kernel dropped the lock with the first sweep: the file is left, the lock is not.
  CHECK(tp::test::run_shell("flock -n '" + (dir / "sweep.lock").string() + "' true").exit_code == 0);
}

// Ops trial, finding 10: a sweep whose cell failed wrote no comparison of the cells that trained.
TEST_CASE("a sweep stopped by a failing cell still compares the cells that trained") {
  const auto dir = tp::test::fresh_dir("sweep_failed_cell");
  // lr 1e20 makes the loss non-finite in the first steps (train.on_nonfinite = "stop": exit 1).
  const auto run = tp::test::run_host(sweep(dir, "--grid optim.lr=0.003,1e20,0.01"));
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK(run.output.find("the cell [2/3] optim.lr=1e20 failed") != std::string::npos);
  REQUIRE(fs::exists(dir / "comparison.csv"));
  const auto csv = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(csv.size() == 3); // the finished cell and the failed one; the third never trained
  const int finished = column(csv[0], "finished");
  REQUIRE(finished >= 0);
  CHECK(csv[1][static_cast<std::size_t>(finished)] == "yes");
  CHECK(csv[2][static_cast<std::size_t>(finished)] == "no");
  CHECK_FALSE(fs::exists(dir / "optim.lr=0.01"));
  CHECK(run.output.find("comparing the 2 cell(s) that trained") != std::string::npos);

  // A cell stopped by its sanity check (a monitor no metric reports) trained nothing, and its
  // monitor does not decide what is compared (before: 'the runs monitor different metrics', and
  // no comparison at all).
  const auto typo_dir = tp::test::fresh_dir("sweep_monitor_typo");
  const auto typo = tp::test::run_host(sweep(typo_dir, "--set checkpoint.mode=\"max\" "
                                                       "--grid checkpoint.monitor=val/accuracy,val/acc"));
  INFO(typo.output);
  CHECK(typo.exit_code == tp::kExitConfig);
  REQUIRE(fs::exists(typo_dir / "comparison.csv"));
  const auto rows = tp::test::read_csv(typo_dir / "comparison.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0][2] == "final val/accuracy");
}

// Experiments trial F2: one diverging cell stopped the sweep, and every rerun failed on it again.
TEST_CASE("--keep-going trains every cell past a failing one, records why it failed and exits non-zero naming it") {
  const auto dir = tp::test::fresh_dir("sweep_keep_going");
  const std::string command = sweep(dir, "--grid optim.lr=0.003,1e20,0.01 --keep-going");
  const auto run = tp::test::run_host(command);
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitRuntime); // the failed cell's own exit code
  CHECK(run.output.find("--keep-going: going on with the next cell") != std::string::npos);
  CHECK(run.output.find("1 of 3 cells failed") != std::string::npos);
  CHECK(run.output.find("optim.lr=1e20 (exit 1: the training loss became non-finite at step") != std::string::npos);
  CHECK(fs::exists(dir / "optim.lr=0.01" / "report.toml")); // the cell after the failure trained

  const toml::table record = toml::parse_file((dir / "sweep.toml").string());
  CHECK(record["cells"][0]["status"].value<std::string>() == "done");
  CHECK(record["cells"][1]["status"].value<std::string>() == "failed");
  CHECK(record["cells"][1]["exit_code"].value<int64_t>() == 1);
  CHECK(record["cells"][1]["reason"].value<std::string>().value_or("").starts_with(
      "the training loss became non-finite at step"));
  CHECK(record["cells"][2]["status"].value<std::string>() == "done");
  CHECK_FALSE(record["cells"][2]["reason"]);

  // Every cell that trained is compared, the failed one as far as it got.
  const auto csv = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(csv.size() == 4);
  const int finished = column(csv[0], "finished");
  REQUIRE(finished >= 0);
  CHECK(csv[2][static_cast<std::size_t>(finished)] == "no");
  CHECK(csv[3][static_cast<std::size_t>(finished)] == "yes");

  // A rerun skips the finished cells and tries the failed one again (it fails alike).
  const auto again = tp::test::run_host(command);
  INFO(again.output);
  CHECK(again.exit_code == tp::kExitRuntime);
  CHECK(count_of(again.output, "finished earlier, skipped") == 2);
  CHECK(again.output.find("[2/3] optim.lr=1e20 ->") != std::string::npos);
}

// Experiments trial F3: `optim.lr=1e-2` trained again a cell `optim.lr=0.01` had trained, and the
// sweep's comparison held only the latest command's grid.
TEST_CASE("a value spelled differently is the same cell, and the comparison holds every finished cell") {
  const auto dir = tp::test::fresh_dir("sweep_same_value");
  const auto first = tp::test::run_host(sweep(dir, "--grid optim.lr=0.01,0.003"));
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const std::string history_before = tp::test::read_text(dir / "optim.lr=0.01" / "history.jsonl");

  // 1e-2 is 0.01: skipped, no new directory; 0.001 is new and trains.
  const auto second = tp::test::run_host(sweep(dir, "--grid optim.lr=1e-2,0.001"));
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(second.output.find("the cell optim.lr=1e-2 has the values of optim.lr=0.01") != std::string::npos);
  CHECK(count_of(second.output, "finished earlier, skipped") == 1);
  CHECK_FALSE(fs::exists(dir / "optim.lr=1e-2"));
  CHECK(tp::test::read_text(dir / "optim.lr=0.01" / "history.jsonl") == history_before);
  CHECK(fs::exists(dir / "optim.lr=0.001" / "report.toml"));

  // The comparison: this grid's two cells, then the earlier grid's 0.003.
  const auto csv = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(csv.size() == 4);
  CHECK(csv[1][0] == "optim.lr=0.01");
  CHECK(csv[2][0] == "optim.lr=0.001");
  CHECK(csv[3][0] == "optim.lr=0.003");
  const toml::table record = toml::parse_file((dir / "sweep.toml").string());
  CHECK(record["cells"].as_array()->size() == 3);
}

// Experiments trial F4: several seeds per setting, but one row per cell and no mean over seeds.
TEST_CASE("a grid over run.seed: comparison_seeds.csv holds each setting's mean and std over its seeds") {
  const auto dir = tp::test::fresh_dir("sweep_seeds");
  const auto run = tp::test::run_host(sweep(dir, "--set train.epochs=1 --grid optim.lr=0.003,0.01 --grid run.seed=1,2"));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("over seeds (run.seed), per setting:") != std::string::npos);
  const auto cells = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(cells.size() == 5);
  const int final_column = column(cells[0], "final val/accuracy");
  REQUIRE(final_column >= 0);
  const auto final_of = [&](std::size_t row) { return std::stod(cells[row][static_cast<std::size_t>(final_column)]); };

  const auto groups = tp::test::read_csv(dir / "comparison_seeds.csv");
  REQUIRE(groups.size() == 3); // header, lr 0.003, lr 0.01
  const auto& header = groups[0];
  CHECK(header[0] == "optim.lr");
  CHECK(header[1] == "seeds");
  CHECK(header[2] == "seed_values");
  const int mean = column(header, "final val/accuracy mean"), stdev = column(header, "final val/accuracy std");
  REQUIRE(mean >= 0);
  REQUIRE(stdev >= 0);
  for (std::size_t g = 0; g < 2; ++g) {
    const auto& row = groups[g + 1];
    CHECK(row[0] == (g == 0 ? "0.003" : "0.01"));
    CHECK(row[1] == "2");
    CHECK(row[2] == "1 2");
    // The cells of the setting are rows 2g+1 and 2g+2 of comparison.csv (seed varies fastest).
    const double a = final_of(2 * g + 1), b = final_of(2 * g + 2);
    CHECK(std::stod(row[static_cast<std::size_t>(mean)]) == doctest::Approx((a + b) / 2).epsilon(1e-12));
    CHECK(std::stod(row[static_cast<std::size_t>(stdev)]) ==
          doctest::Approx(std::abs(a - b) / std::sqrt(2.0)).epsilon(1e-9)); // sample std of two values
  }
  CHECK(tp::test::read_text(dir / "comparison_seeds.md").find("± ") != std::string::npos);
}
