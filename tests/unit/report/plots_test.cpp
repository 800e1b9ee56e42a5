// Training plots: draw_run_plots on histories written by tp::History (PNG signature, pixel size,
// real content decoded with OpenCV), the reader's errors, thread safety, and `host plot` as a
// user runs it (exit codes, output, no display).
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/host_runner.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/error.h"
#include "tp/framework/report/plots.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

using tp::test::contains;

// A run of `epochs` x `steps_per_epoch` steps, as the trainer logs it: per-step loss, lr and
// timings; per-epoch train/val loss and val/accuracy (validation metrics only on epoch records).
// Step 3's loss is NaN, which History writes as null.
fs::path write_run(const std::string& name, int epochs, int steps_per_epoch) {
  const fs::path dir = tp::test::fresh_dir("plots/" + name);
  tp::History history(dir, true);
  int step = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int i = 0; i < steps_per_epoch; ++i) {
      ++step;
      const double loss = step == 3 ? std::nan("") : 2.0 * std::exp(-step / 200.0) + 0.1 * std::sin(step);
      history.add({"step",
                   {{"step", double(step)},
                    {"epoch", double(epoch)},
                    {"lr", 1e-3 * (1.0 - double(step) / (epochs * steps_per_epoch))},
                    {"train/loss", loss},
                    {"time/data_wait_s", 0.002 + 0.001 * (step % 7)},
                    {"time/compute_s", 0.03 + 0.002 * (step % 5)}}});
    }
    history.add({"epoch",
                 {{"epoch", double(epoch + 1)},
                  {"step", double(step)},
                  {"lr", 1e-3},
                  {"train/loss", 2.0 * std::exp(-step / 200.0)},
                  {"val/loss", 2.1 * std::exp(-step / 200.0)},
                  {"val/accuracy", 1.0 - 0.5 * std::exp(-epoch / 2.0)}}});
  }
  return dir;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint32_t big_endian_u32(const std::string& bytes, std::size_t at) {
  uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

// A complete PNG of the documented size: signature, IHDR first, IEND last.
void check_png_file(const fs::path& file) {
  INFO(file.string());
  REQUIRE(fs::is_regular_file(file));
  const std::string bytes = read_bytes(file);
  REQUIRE(bytes.size() > 33);
  CHECK(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  CHECK(bytes.compare(12, 4, "IHDR") == 0);
  CHECK(big_endian_u32(bytes, 16) == uint32_t(tp::kPlotWidthPx));
  CHECK(big_endian_u32(bytes, 20) == uint32_t(tp::kPlotHeightPx));
  CHECK(bytes.compare(bytes.size() - 8, 4, "IEND") == 0);
}

// Pixels within a small distance of an sRGB colour (OpenCV stores BGR).
int count_colour(const cv::Mat& image, int r, int g, int b) {
  cv::Mat mask;
  cv::inRange(image, cv::Scalar(b - 12, g - 12, r - 12), cv::Scalar(b + 12, g + 12, r + 12), mask);
  return cv::countNonZero(mask);
}

cv::Mat decode(const fs::path& file) {
  cv::Mat image = cv::imread(file.string(), cv::IMREAD_COLOR);
  REQUIRE_FALSE(image.empty());
  CHECK(image.cols == tp::kPlotWidthPx);
  CHECK(image.rows == tp::kPlotHeightPx);
  cv::Mat grey;
  image.convertTo(grey, CV_64F);
  cv::Scalar mean, stddev;
  cv::meanStdDev(grey.reshape(1), mean, stddev);
  INFO(file.string());
  CHECK(stddev[0] > 10.0);  // a blank or one-colour image has ~0
  return image;
}

std::vector<std::string> file_names(const std::vector<fs::path>& files) {
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.filename().string());
  return names;
}

void write_text(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

}  // namespace

TEST_CASE("draw_run_plots draws loss, each metric, lr and time into run_dir/plots") {
  const fs::path dir = write_run("basic", 4, 50);
  REQUIRE(contains(read_bytes(dir / "history.jsonl"), "\"train/loss\":null"));

  const auto files = tp::draw_run_plots(dir);
  CHECK(file_names(files) == std::vector<std::string>{"loss.png", "val_accuracy.png", "lr.png", "time.png"});
  for (const auto& file : files) {
    CHECK(file.parent_path() == dir / "plots");
    check_png_file(file);
    decode(file);
  }
  // The data itself is drawn, not only the axes: train/loss in blue tints, val/loss in orange.
  const cv::Mat loss = decode(dir / "plots" / "loss.png");
  CHECK(count_colour(loss, 31, 119, 180) > 200);   // train/loss per epoch
  CHECK(count_colour(loss, 255, 127, 14) > 200);   // val/loss per epoch
  CHECK(count_colour(loss, 158, 202, 225) > 200);  // train/loss per step
  CHECK(count_colour(decode(dir / "plots" / "lr.png"), 44, 160, 44) > 200);
  // Nothing else is left behind (temporary files are renamed into place).
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir / "plots")) ++entries;
  CHECK(entries == files.size());
}

TEST_CASE("evaluations every N steps (eval records) are drawn: val/loss on loss.png, each metric its chart") {
  // eval.strategy = "steps": no epoch record carries a val/ value (before, no chart showed one).
  const fs::path dir = tp::test::fresh_dir("plots/eval_records");
  tp::History history(dir, true);
  for (int step = 1; step <= 60; ++step) {
    history.add({"step", {{"step", double(step)}, {"epoch", 0}, {"lr", 1e-3}, {"train/loss", 2.0 / step}}});
    if (step % 7 == 0 || step == 60)
      history.add({"eval", {{"step", double(step)}, {"epoch", 0}, {"val/loss", 2.5 / step}, {"val/accuracy", step / 60.0}}});
  }
  history.add({"epoch", {{"epoch", 1}, {"step", 60}, {"lr", 1e-3}, {"train/loss", 0.1}}});
  const auto files = tp::draw_run_plots(dir);
  CHECK(file_names(files) == std::vector<std::string>{"loss.png", "val_accuracy.png", "lr.png"});
  CHECK(count_colour(decode(dir / "plots" / "loss.png"), 255, 127, 14) > 100);          // val/loss, orange
  CHECK(count_colour(decode(dir / "plots" / "val_accuracy.png"), 255, 127, 14) > 100);
}

TEST_CASE("redrawing replaces the PNGs and follows the growing history") {
  const fs::path dir = write_run("redraw", 1, 20);
  const auto first = tp::draw_run_plots(dir);
  const std::string before = read_bytes(dir / "plots" / "loss.png");
  {
    tp::History more(dir, true);  // appends, as the trainer does after the next epoch
    more.add({"step", {{"step", 21}, {"epoch", 1}, {"lr", 1e-4}, {"train/loss", 5.0}}});
    more.add({"epoch", {{"epoch", 2}, {"step", 21}, {"train/loss", 5.0}, {"val/loss", 5.5}, {"val/top5", 0.5}}});
  }
  const auto second = tp::draw_run_plots(dir);
  CHECK(file_names(second) == std::vector<std::string>{"loss.png", "val_accuracy.png", "val_top5.png", "lr.png", "time.png"});
  CHECK(read_bytes(dir / "plots" / "loss.png") != before);
  for (const auto& file : second) check_png_file(file);
}

TEST_CASE("metric names become safe file names; clashes get a suffix") {
  const fs::path dir = tp::test::fresh_dir("plots/names");
  write_text(dir / "history.jsonl",
             "{\"kind\":\"epoch\",\"step\":1,\"val/acc@1 (%)\":50,\"val_acc_1____\":1,\"lr\":0.1}\n"
             "{\"kind\":\"epoch\",\"step\":2,\"val/acc@1 (%)\":60,\"val_acc_1____\":2,\"lr\":0.1}\n");
  const auto files = tp::draw_run_plots(dir);
  CHECK(file_names(files) == std::vector<std::string>{"val_acc_1____.png", "val_acc_1_____2.png", "lr.png"});
  for (const auto& file : files) check_png_file(file);
}

TEST_CASE("a malformed line is a tp::Error naming the file and the line") {
  const fs::path dir = tp::test::fresh_dir("plots/malformed");
  const std::string good = "{\"kind\":\"step\",\"step\":1,\"train/loss\":0.5}\n";
  struct Case {
    std::string line;
    std::string says;
  };
  const std::vector<Case> cases{
      {"{\"kind\":\"step\",\"step\":2,\"train/loss\":\"abc\"}", "expected a number or null"},
      {"{\"kind\":\"step\",\"step\":2,\"train/loss\":NaN}", "expected a number or null"},
      {"{\"kind\":\"step\",\"step\":2,\"train/loss\":{\"a\":1}}", "expected a number or null"},
      {"{\"kind\":\"step\",\"step\":2,\"step\":3}", "appears twice"},
      {"{\"step\":2,\"train/loss\":0.5}", "no \"kind\""},
      {"{\"kind\":7,\"step\":2}", "\"kind\" must be a string"},
      {"[1,2]", "expected '{'"},
      {"{\"kind\":\"step\",\"step\":2} trailing", "after the closing '}'"},
      {"{\"kind\":\"step\",\"step\":2", "expected '}'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    write_text(dir / "history.jsonl", good + good + c.line + "\n" + good);
    try {
      tp::draw_run_plots(dir);
      FAIL("no error for a malformed line");
    } catch (const tp::Error& e) {
      const std::string message = e.what();
      CHECK(contains(message, (dir / "history.jsonl").string() + ":3:"));
      CHECK(contains(message, c.says));
    }
  }
}

TEST_CASE("an unterminated last line is a record still being written, and is skipped") {
  const fs::path dir = tp::test::fresh_dir("plots/partial");
  write_text(dir / "history.jsonl",
             "{\"kind\":\"step\",\"step\":1,\"train/loss\":0.5}\n"
             "{\"kind\":\"step\",\"step\":2,\"train/loss\":0.4}\n"
             "{\"kind\":\"step\",\"st");
  const auto files = tp::draw_run_plots(dir);
  CHECK(file_names(files) == std::vector<std::string>{"loss.png"});
}

TEST_CASE("a missing run directory or history is a tp::Error that says what to pass") {
  CHECK_THROWS_WITH_AS(tp::draw_run_plots("/nonexistent/run"),
                       doctest::Contains("/nonexistent/run does not exist"), tp::Error);
  const fs::path dir = tp::test::fresh_dir("plots/no_history");
  CHECK_THROWS_WITH_AS(tp::draw_run_plots(dir), doctest::Contains("history.jsonl: the file does not exist"), tp::Error);
}

TEST_CASE("an empty history draws nothing") {
  const fs::path dir = tp::test::fresh_dir("plots/empty");
  write_text(dir / "history.jsonl", "");
  CHECK(tp::draw_run_plots(dir).empty());
  CHECK_FALSE(fs::exists(dir / "plots"));
}

TEST_CASE("draw_run_plots may be called from several threads at once") {
  std::vector<fs::path> dirs;
  for (int i = 0; i < 4; ++i) dirs.push_back(write_run("threads_" + std::to_string(i), 2, 30));
  dirs.push_back(dirs[0]);  // two threads on the same run, too
  std::vector<std::vector<fs::path>> results(dirs.size());
  std::vector<std::string> errors(dirs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < dirs.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        results[i] = tp::draw_run_plots(dirs[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    CAPTURE(i);
    CHECK(errors[i].empty());
    CHECK(results[i].size() == 4);
    for (const auto& file : results[i]) check_png_file(file);
  }
}

TEST_CASE("a 10k-step history draws in well under a second of CPU") {
  const fs::path dir = write_run("10k", 10, 1000);
  const std::clock_t cpu_start = std::clock();
  const auto wall_start = std::chrono::steady_clock::now();
  const auto files = tp::draw_run_plots(dir);
  const double cpu_s = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  MESSAGE("10k steps, " << files.size() << " charts: " << cpu_s << " s CPU, " << wall_s << " s wall");
  CHECK(files.size() == 4);
  CHECK(cpu_s < 2.0);  // ~0.15 s measured; the bound only catches a lost decimation
}

/* `host plot` */

TEST_CASE("host plot RUN_DIR redraws the plots and prints their paths, headless and quiet") {
  const fs::path dir = write_run("cli", 2, 30);
  // No X display, and nothing but the paths on stdout and stderr.
  const auto run = tp::test::run_shell("env -u DISPLAY -u WAYLAND_DISPLAY '" + std::string(tp::test::build_dir()) +
                                       "/bin/host' plot '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  const fs::path plots = dir / "plots";
  CHECK(run.output == (plots / "loss.png").string() + "\n" + (plots / "val_accuracy.png").string() + "\n" +
                          (plots / "lr.png").string() + "\n" + (plots / "time.png").string() + "\n");
  for (const char* name : {"loss.png", "val_accuracy.png", "lr.png", "time.png"}) check_png_file(plots / name);
}

TEST_CASE("odd histories still draw, and PLplot stays silent") {
  // One record; a metric that is always null; a diverged loss; values far apart in magnitude;
  // a metric name with PLplot's text escape character.
  const fs::path dir = tp::test::fresh_dir("plots/odd");
  write_text(dir / "history.jsonl",
             "{\"kind\":\"step\",\"step\":1,\"lr\":0,\"train/loss\":1e300,\"grad_norm\":null}\n"
             "{\"kind\":\"step\",\"step\":2,\"lr\":1e-12,\"train/loss\":-1e-300,\"grad_norm\":null}\n"
             "{\"kind\":\"step\",\"step\":3,\"lr\":1e-12,\"train/loss\":2.5,\"grad_norm\":null}\n"
             "{\"kind\":\"epoch\",\"step\":3,\"val/#1\":5e-324,\"val/loss\":1e12}\n"
             "{\"kind\":\"eval\",\"step\":3,\"val/loss\":1}\n"
             "{\"kind\":\"epoch\",\"epoch\":1,\"val/loss\":1}\n");
  const auto run = tp::test::run_host("plot '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  const fs::path plots = dir / "plots";
  CHECK(run.output == (plots / "loss.png").string() + "\n" + (plots / "grad_norm.png").string() + "\n" +
                          (plots / "val__1.png").string() + "\n" + (plots / "lr.png").string() + "\n");
  for (const char* name : {"loss.png", "grad_norm.png", "val__1.png", "lr.png"}) {
    check_png_file(plots / name);
    decode(plots / name);
  }
}

TEST_CASE("host plot with a wrong directory exits 2 with a clear message") {
  auto run = tp::test::run_host("plot /nonexistent");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "'/nonexistent' does not exist"));
  CHECK(contains(run.output, "run.output_dir"));

  const fs::path empty = tp::test::fresh_dir("plots/cli_no_history");
  run = tp::test::run_host("plot '" + empty.string() + "'");
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "has no history.jsonl"));

  run = tp::test::run_host("plot");
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "exactly one RUN_DIR"));
}

TEST_CASE("host plot with a damaged history exits 1 naming the line") {
  const fs::path dir = tp::test::fresh_dir("plots/cli_damaged");
  write_text(dir / "history.jsonl", "{\"kind\":\"step\",\"step\":1,\"train/loss\":0.5}\n{\"kind\":\"step\",\"step\":\n"
                                    "{\"kind\":\"step\",\"step\":3,\"train/loss\":0.5}\n");
  const auto run = tp::test::run_host("plot '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(contains(run.output, "history.jsonl:2:"));
}

TEST_CASE("host --help lists host plot") {
  const auto run = tp::test::run_host("--help");
  CHECK(run.exit_code == 0);
  CHECK(contains(run.output, "host plot RUN_DIR"));
}
