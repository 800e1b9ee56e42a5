// host compare on three small runs: the differing config keys are exactly the columns, the
// numbers are those of each run's history.jsonl and report.toml, a missing run directory is
// refused naming it, and an unfinished run is compared as far as it got.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "experiment_helpers.h"
#include "integration/history_reader.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using tp::test::column;

namespace {

double number(const std::string& cell) {
  REQUIRE_FALSE(cell.empty());
  return std::strtod(cell.c_str(), nullptr);
}

// The three runs, trained once for every test case of this file.
const fs::path& runs_dir() {
  static const fs::path dir = [] {
    const auto root = tp::test::fresh_dir("compare_runs");
    const std::vector<std::pair<std::string, std::string>> runs{
        {"a", "--set optim.lr=0.003"},
        {"b", "--set optim.lr=0.01"},
        {"c", "--set optim.lr=0.01 --set train.batch_size=16"}};
    for (const auto& [name, sets] : runs) {
      const auto run = tp::test::run_host(tp::test::kTiny + sets + " --output-dir '" + (root / name).string() + "'");
      INFO(run.output);
      REQUIRE(run.exit_code == 0);
    }
    return root;
  }();
  return dir;
}

std::string compare(const std::string& args, const fs::path& out) {
  const fs::path& r = runs_dir();
  return "compare '" + (r / "a").string() + "' '" + (r / "b").string() + "' '" + (r / "c").string() + "' " + args +
         " --output-dir '" + out.string() + "'";
}

}  // namespace

TEST_CASE("host compare: the differing keys as columns, each run's numbers from its own files") {
  const auto out = tp::test::fresh_dir("compare_out");
  const auto run = tp::test::run_host(compare("", out));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto csv = tp::test::read_csv(out / "comparison.csv");
  REQUIRE(csv.size() == 4);
  const auto& header = csv[0];
  // Exactly the keys that differ (output_dir, though different, is a location, not a setting).
  REQUIRE(header.size() > 3);
  CHECK(header[0] == "run");
  CHECK(header[1] == "optim.lr");
  CHECK(header[2] == "train.batch_size");
  CHECK(header[3] == "final val/accuracy"); // the runs' checkpoint.monitor
  CHECK(column(header, "run.output_dir") == -1);

  const char* names[] = {"a", "b", "c"};
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(names[i]);
    const auto& row = csv[i + 1];
    REQUIRE(row.size() == header.size());
    CHECK(row[0] == names[i]);
    CHECK(row[1] == (i == 0 ? "0.003" : "0.01"));
    CHECK(row[2] == (i == 2 ? "16" : "32"));
    const fs::path dir = runs_dir() / names[i];
    const auto history = tp::test::read_history(dir);
    const auto epochs = tp::test::rows_of(history, "epoch");
    REQUIRE(epochs.size() == 2);
    double best = 0, steps = 0, seconds = 0, samples = 0;
    for (const auto& e : epochs) {
      best = std::max(best, e.values.at("val/accuracy"));
      seconds += e.values.at("time/epoch_s");
      samples += e.values.at("throughput/samples_per_s") * e.values.at("time/epoch_s");
    }
    for (const auto& r : history) steps = std::max(steps, r.values.at("step"));
    CHECK(number(row[3]) == epochs.back().values.at("val/accuracy"));
    CHECK(number(row[static_cast<std::size_t>(column(header, "best val/accuracy"))]) == best);
    CHECK(number(row[static_cast<std::size_t>(column(header, "epochs"))]) == 2);
    CHECK(number(row[static_cast<std::size_t>(column(header, "steps"))]) == steps);
    CHECK(steps == (i == 2 ? 32 : 16));
    const toml::table report = toml::parse_file((dir / "report.toml").string());
    CHECK(number(row[static_cast<std::size_t>(column(header, "epoch_s"))]) == doctest::Approx(seconds / 2).epsilon(1e-12));
    CHECK(number(row[static_cast<std::size_t>(column(header, "train_samples_per_s"))]) ==
          doctest::Approx(samples / seconds).epsilon(1e-12));
    // The two training-loop columns agree with each other; the fit's includes evaluation and saves.
    CHECK(number(row[static_cast<std::size_t>(column(header, "train_ms_per_step"))]) ==
          doctest::Approx(1e3 * seconds / steps).epsilon(1e-12));
    CHECK(number(row[static_cast<std::size_t>(column(header, "fit_ms_per_step"))]) ==
          report["ms_per_step"].value<double>());
    CHECK(number(row[static_cast<std::size_t>(column(header, "fit_ms_per_step"))]) >
          number(row[static_cast<std::size_t>(column(header, "train_ms_per_step"))]));
    CHECK(number(row[static_cast<std::size_t>(column(header, "wall_s"))]) == report["train_seconds"].value<double>());
    CHECK(number(row[static_cast<std::size_t>(column(header, "peak_host_mb"))]) > 10);
    CHECK(row[static_cast<std::size_t>(column(header, "peak_device_mb"))].empty()); // CPU runs
    // One rank each: the global batch is the batch (ops trial: a 2-rank run read as batch 16).
    CHECK(row[static_cast<std::size_t>(column(header, "ranks"))] == "1");
    CHECK(row[static_cast<std::size_t>(column(header, "global_batch"))] == (i == 2 ? "16" : "32"));
    CHECK(row[static_cast<std::size_t>(column(header, "finished"))] == "yes");
    for (const char* split : {"forward_ms", "backward_ms", "optimizer_ms"})
      CHECK(number(row[static_cast<std::size_t>(column(header, split))]) == report[split].value<double>());
  }
  for (const char* png : {"comparison_loss_step.png", "comparison_loss_time.png", "comparison_val_accuracy_step.png",
                          "comparison_val_accuracy_time.png"})
    CHECK(fs::file_size(out / png) > 1000);
  CHECK(tp::test::count_of(tp::test::read_text(out / "comparison.md"), "\n|") == 4);
}

TEST_CASE("host compare --metric val/loss: lower is better") {
  const auto out = tp::test::fresh_dir("compare_loss");
  const auto run = tp::test::run_host(compare("--metric val/loss", out));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto csv = tp::test::read_csv(out / "comparison.csv");
  REQUIRE(csv.size() == 4);
  const int best = column(csv[0], "best val/loss");
  REQUIRE(best >= 0);
  for (std::size_t i = 0; i < 3; ++i) {
    double lowest = 1e300;
    for (const auto& e : tp::test::rows_of(tp::test::read_history(runs_dir() / csv[i + 1][0]), "epoch"))
      lowest = std::min(lowest, e.values.at("val/loss"));
    CHECK(number(csv[i + 1][static_cast<std::size_t>(best)]) == lowest);
  }
}

// Experiments trial F8: a metric whose name says neither way (val/ece, a calibration error) was
// ranked higher-is-better, with no way to say otherwise.
TEST_CASE("host compare --mode min|max sets the direction of --metric for every run") {
  for (const char* mode : {"min", "max"}) {
    INFO(mode);
    const auto out = tp::test::fresh_dir(std::string("compare_mode_") + mode);
    const auto run = tp::test::run_host(compare("--metric val/accuracy --mode " + std::string(mode), out));
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const auto csv = tp::test::read_csv(out / "comparison.csv");
    REQUIRE(csv.size() == 4);
    const int best = column(csv[0], "best val/accuracy");
    REQUIRE(best >= 0);
    for (std::size_t i = 0; i < 3; ++i) {
      std::vector<double> values;
      for (const auto& e : tp::test::rows_of(tp::test::read_history(runs_dir() / csv[i + 1][0]), "epoch"))
        values.push_back(e.values.at("val/accuracy"));
      REQUIRE_FALSE(values.empty());
      const double expected = std::string(mode) == "min" ? *std::min_element(values.begin(), values.end())
                                                         : *std::max_element(values.begin(), values.end());
      CHECK(number(csv[i + 1][static_cast<std::size_t>(best)]) == expected);
    }
  }
  const auto bad = tp::test::run_host(compare("--mode lowest", tp::test::fresh_dir("compare_mode_bad")));
  CHECK(bad.exit_code == tp::kExitConfig);
  CHECK(bad.output.find("--mode must be min") != std::string::npos);
}

namespace {

// `text` with the value of `key` made null in every record that carries it from line `from` on
// (History's encoding of a NaN or an infinity).
std::string nulled(const std::string& text, const std::string& key, std::size_t from) {
  std::string out;
  std::size_t line = 0, begin = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    std::string record = text.substr(begin, end - begin + 1);
    const std::size_t at = record.find("\"" + key + "\":");
    if (line++ >= from && at != std::string::npos) {
      const std::size_t value = at + key.size() + 3;
      record.replace(value, record.find_first_of(",}", value) - value, "null");
    }
    out += record;
    begin = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("host compare: a metric recorded as null (a diverged run) is NaN, never 'not recorded'") {
  const auto out = tp::test::fresh_dir("compare_null");
  const fs::path& r = runs_dir();
  const std::string history = tp::test::read_text(r / "b" / "history.jsonl");
  const auto lines = static_cast<std::size_t>(std::count(history.begin(), history.end(), '\n'));
  // `late`: the last evaluation diverged; `never`: every evaluation did.
  for (const auto& [name, from] : {std::pair<std::string, std::size_t>{"late", lines - 1}, {"never", 0}}) {
    fs::copy(r / "b", out / name, fs::copy_options::recursive);
    std::ofstream(out / name / "history.jsonl", std::ios::trunc) << nulled(history, "val/loss", from);
  }
  const auto run = tp::test::run_host("compare '" + (r / "a").string() + "' '" + (out / "late").string() + "' '" +
                                      (out / "never").string() + "' --metric val/loss --output-dir '" + out.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);  // before: a configuration error, and no comparison at all
  const auto csv = tp::test::read_csv(out / "comparison.csv");
  REQUIRE(csv.size() == 4);
  const auto cell = [&](std::size_t row, const char* name) { return csv[row][static_cast<std::size_t>(column(csv[0], name))]; };
  CHECK_FALSE(cell(1, "final val/loss").empty());
  CHECK(cell(2, "final val/loss").empty());  // the last value, NaN, not an earlier finite one
  // The best of the finite values: every epoch's but the last.
  const auto epochs = tp::test::rows_of(tp::test::read_history(r / "b"), "epoch");
  REQUIRE(epochs.size() >= 2);
  double lowest = 1e300;
  for (std::size_t i = 0; i + 1 < epochs.size(); ++i) lowest = std::min(lowest, epochs[i].values.at("val/loss"));
  CHECK(number(cell(2, "best val/loss")) == lowest);
  CHECK(cell(3, "final val/loss").empty());
  CHECK(cell(3, "best val/loss").empty());
}

TEST_CASE("host compare's train_samples_per_s counts every rank's samples") {
  // The history's throughput is rank 0's; a 2-rank run trained twice as many samples in that time.
  const auto out = tp::test::fresh_dir("compare_ranks");
  const fs::path& r = runs_dir();
  fs::copy(r / "b", out / "two_ranks", fs::copy_options::recursive);
  std::string runtime = tp::test::read_text(out / "two_ranks" / "runtime.toml");
  const std::size_t at = runtime.find("world_size = 1\n");
  REQUIRE(at != std::string::npos);
  std::ofstream(out / "two_ranks" / "runtime.toml", std::ios::trunc) << runtime.replace(at, 15, "world_size = 2\n");
  const auto run = tp::test::run_host("compare '" + (r / "b").string() + "' '" + (out / "two_ranks").string() +
                                      "' --output-dir '" + out.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto csv = tp::test::read_csv(out / "comparison.csv");
  REQUIRE(csv.size() == 3);
  const auto rate = [&](std::size_t row) { return number(csv[row][static_cast<std::size_t>(column(csv[0], "train_samples_per_s"))]); };
  CHECK(rate(2) == doctest::Approx(2 * rate(1)).epsilon(1e-9));
}

TEST_CASE("host compare names runs apart whose directory names coincide") {
  // The same cell of two sweeps, and one directory given twice.
  const auto out = tp::test::fresh_dir("compare_same_names");
  const fs::path& r = runs_dir();
  for (const char* sweep : {"sweep_a", "sweep_b"}) {
    fs::create_directories(out / sweep);
    fs::copy(r / "a", out / sweep / "a", fs::copy_options::recursive);
  }
  const auto run = tp::test::run_host("compare '" + (out / "sweep_a" / "a").string() + "' '" + (out / "sweep_b" / "a").string() +
                                      "' '" + (r / "b").string() + "' '" + (r / "b").string() + "' --output-dir '" +
                                      out.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto csv = tp::test::read_csv(out / "comparison.csv");
  REQUIRE(csv.size() == 5);
  CHECK(csv[1][0] == "sweep_a/a");
  CHECK(csv[2][0] == "sweep_b/a");
  CHECK(csv[3][0] == "b");
  CHECK(csv[4][0] == "b (2)");
}

TEST_CASE("host compare refuses a missing directory and an unknown metric, naming them; shows an unfinished run") {
  const auto out = tp::test::fresh_dir("compare_refused");
  const fs::path& r = runs_dir();
  const auto missing = tp::test::run_host("compare '" + (r / "a").string() + "' '" + (r / "nope").string() +
                                          "' --output-dir '" + out.string() + "'");
  INFO(missing.output);
  CHECK(missing.exit_code == tp::kExitConfig);
  CHECK(missing.output.find((r / "nope").string() + "' does not exist") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "comparison.csv"));

  const fs::path partial = out / "partial";
  fs::copy(r / "b", partial, fs::copy_options::recursive);
  fs::remove(partial / "report.toml");
  const auto unfinished = tp::test::run_host("compare '" + (r / "a").string() + "' '" + partial.string() +
                                             "' --output-dir '" + out.string() + "'");
  // Ops trial, finding 10: an unfinished run (a sweep's failed cell, a run still training) was
  // refused, so nothing could be seen beside it. Its row holds its history's numbers.
  INFO(unfinished.output);
  CHECK(unfinished.exit_code == 0);
  CHECK(unfinished.output.find("'" + partial.string() + "' has not finished (no report.toml") != std::string::npos);
  const auto csv = tp::test::read_csv(out / "comparison.csv");
  REQUIRE(csv.size() == 3);
  const auto& header = csv[0];
  const auto cell = [&](std::size_t row, const char* name) { return csv[row][static_cast<std::size_t>(column(header, name))]; };
  CHECK(cell(1, "finished") == "yes");
  CHECK(cell(2, "finished") == "no");
  CHECK(cell(2, "wall_s").empty()); // the report's columns
  CHECK(cell(2, "fit_ms_per_step").empty());
  CHECK(cell(2, "steps") == "16"); // the history's
  CHECK_FALSE(cell(2, "final val/accuracy").empty());
  // A training holding the run's lock (flock(1) stands in for host train): "running".
  const auto live = tp::test::run_shell("flock -x '" + (partial / "run.lock").string() + "' '" +
                                        std::string(tp::test::build_dir()) + "/bin/host' compare '" +
                                        (r / "a").string() + "' '" + partial.string() + "' --output-dir '" +
                                        out.string() + "' 2>&1");
  INFO(live.output);
  CHECK(live.output.find("'" + partial.string() + "' is training now") != std::string::npos);
  CHECK(tp::test::read_csv(out / "comparison.csv")[2][static_cast<std::size_t>(column(header, "finished"))] ==
        "running");

  const auto unknown = tp::test::run_host(compare("--metric val/acc", out));
  INFO(unknown.output);
  CHECK(unknown.exit_code == tp::kExitConfig);
  CHECK(unknown.output.find("never recorded 'val/acc'") != std::string::npos);
  CHECK(unknown.output.find("val/accuracy") != std::string::npos);
}
