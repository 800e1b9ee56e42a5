// tp::TensorBoardWriter without a training run: which events a run writes and in what order, the
// tags of each history kind, images, the rewrite on resume (no step twice, run-level summaries
// once, missing records written again), a write failure (a file size limit standing in for a
// full disk), and the cost of one record next to history.jsonl's.
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/monitor/tensorboard_events.h"
#include "tp/framework/monitor/tensorboard_writer.h"
#include "tp/framework/monitor/tfrecord.h"
#include "tp/framework/util/log.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using Tags = std::vector<std::string>;

namespace {

std::vector<tp::EventInfo> read_events(const fs::path& file) {
  const std::string bytes = tp::test::read_text(file);
  const tp::TfRecords records = tp::split_tfrecords(bytes);
  CHECK(records.valid_bytes == bytes.size()); // no torn record
  std::vector<tp::EventInfo> events;
  for (std::string_view record : records.records) events.push_back(tp::inspect_event(record));
  return events;
}

std::vector<fs::path> event_files(const fs::path& run_dir) {
  std::vector<fs::path> files;
  if (!fs::exists(run_dir / "tensorboard")) return files;
  for (const auto& entry : fs::directory_iterator(run_dir / "tensorboard")) files.push_back(entry.path());
  return files;
}

const toml::table& config() {
  static const toml::table table = toml::parse("[train]\nepochs = 2\nlr = 0.5\namp = true\n"
                                               "[[metrics]]\ncomponent = \"acc\"\n");
  return table;
}

tp::HistoryRecord step_record(int64_t step) {
  return {"step", {{"step", double(step)}, {"epoch", 0.0}, {"lr", 0.1}, {"train/loss", 1.0 / double(step)}}};
}

tp::HistoryRecord epoch_record(int64_t step, int64_t epoch) {
  return {"epoch", {{"epoch", double(epoch)}, {"step", double(step)}, {"train/loss", 0.5}, {"val/accuracy", 0.75}}};
}

// The smallest file event_images accepts: a PNG signature and an IHDR chunk (w x h, RGBA).
void write_png_header(const fs::path& file, uint32_t width, uint32_t height) {
  std::string png = "\x89PNG\r\n\x1a\n";
  png += std::string("\0\0\0\x0d", 4) + "IHDR";
  for (uint32_t v : {width, height})
    for (int shift = 24; shift >= 0; shift -= 8) png.push_back(static_cast<char>((v >> shift) & 0xff));
  png += std::string("\x08\x06\0\0\0", 5) + std::string(4, '\0'); // depth 8, colour type 6, CRC unchecked
  std::ofstream(file, std::ios::binary) << png;
}

// Every tag's steps, in file order.
std::map<std::string, std::vector<int64_t>> steps_by_tag(const std::vector<tp::EventInfo>& events) {
  std::map<std::string, std::vector<int64_t>> steps;
  for (const tp::EventInfo& event : events)
    for (const std::string& tag : event.tags) steps[tag].push_back(event.step);
  return steps;
}

}  // namespace

TEST_CASE("a run's events: header, config, hparams start, one event per record, final metrics, end") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_fresh");
  tp::Logger log;
  tp::TensorBoardWriter off(dir, /*enabled=*/false, false, log);
  off.start(config());
  off.add(step_record(1));
  CHECK(off.file().empty());
  CHECK_FALSE(fs::exists(dir / "tensorboard"));

  tp::TensorBoardWriter writer(dir, /*enabled=*/true, false, log);
  writer.start(config());
  writer.add(step_record(1));
  writer.add(step_record(2));
  writer.add(epoch_record(2, 1));
  writer.add({"eval", {{"step", 2.0}, {"epoch", 1.0}, {"val/loss", 0.25}}});
  writer.add({"note", {{"epoch", 1.0}}}); // no step: no place on the x axis, skipped
  writer.finish(2, {{"val/accuracy", 0.75}});

  REQUIRE(event_files(dir).size() == 1);
  CHECK(writer.file() == event_files(dir).front());
  CHECK(writer.file().filename().string().starts_with("events.out.tfevents."));
  const auto events = read_events(writer.file());
  REQUIRE(events.size() == 10);
  for (const auto& event : events) CHECK(event.parsed);
  CHECK(events[0].file_version);
  CHECK(events[1].tags == Tags{"config"});
  CHECK(events[2].tags == Tags{"_hparams_/session_start_info"});
  CHECK(events[3].step == 1);
  CHECK(events[3].tags == Tags{"step", "epoch", "lr", "train/loss"});
  CHECK(events[4].step == 2);
  CHECK(events[5].step == 2);
  CHECK(events[5].tags == Tags{"epoch/epoch", "epoch/step", "epoch/train/loss", "epoch/val/accuracy"});
  CHECK(events[6].tags == Tags{"eval/step", "eval/epoch", "eval/val/loss"});
  CHECK(events[7].step == 2);
  CHECK(events[7].tags == Tags{"final/train/loss", "final/val/accuracy"});
  CHECK(events[8].tags == Tags{"_hparams_/experiment"});
  CHECK(events[9].tags == Tags{"_hparams_/session_end_info"});
  CHECK(events[9].step == 2);
}

TEST_CASE("images: one event per redraw, tagged plots/<name>; a redraw at a step already written is skipped") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_images");
  fs::create_directories(dir / "plots");
  write_png_header(dir / "plots" / "loss.png", 1000, 600);
  write_png_header(dir / "plots" / "val_accuracy.png", 1000, 600);
  const std::vector<fs::path> pngs = {dir / "plots" / "loss.png", dir / "plots" / "val_accuracy.png"};
  tp::Logger log;
  tp::TensorBoardWriter without(dir / "without", true, /*images=*/false, log);
  without.start(config());
  without.add_images(pngs, 3);
  CHECK(read_events(without.file()).size() == 3); // header, config, session start

  tp::TensorBoardWriter writer(dir, true, /*images=*/true, log);
  writer.start(config());
  writer.add_images(pngs, 3);
  writer.add_images(pngs, 3); // the end of fit() redraws at the last evaluation's step
  writer.add_images(pngs, 5);
  const auto steps = steps_by_tag(read_events(writer.file()));
  CHECK(steps.at("plots/loss") == std::vector<int64_t>{3, 5});
  CHECK(steps.at("plots/val_accuracy") == std::vector<int64_t>{3, 5});
}

TEST_CASE("resume: events after the step are dropped, run-level summaries written once, the run continues") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_resume");
  write_png_header(dir / "plot.png", 10, 10);
  tp::Logger log;
  std::vector<tp::HistoryRecord> history;
  {
    tp::TensorBoardWriter first(dir, true, true, log);
    first.start(config());
    for (int64_t step = 1; step <= 6; ++step) {
      history.push_back(step_record(step));
      first.add(history.back());
      if (step % 3 == 0) {
        history.push_back(epoch_record(step, step / 3));
        first.add(history.back());
        first.add_images({dir / "plot.png"}, step);
      }
    }
    first.finish(6, {{"val/accuracy", 0.75}});
  }
  // The resumed process: History::resume(4) kept the records at steps <= 4.
  std::vector<tp::HistoryRecord> kept(history.begin(), history.begin() + 5); // steps 1, 2, 3, epoch at 3, 4
  tp::TensorBoardWriter second(dir, true, true, log);
  second.resume(4, kept);
  second.start(config());
  for (int64_t step = 5; step <= 8; ++step) {
    second.add(step_record(step));
    if (step % 3 == 0) {
      second.add(epoch_record(step, step / 3));
      second.add_images({dir / "plot.png"}, step);
    }
  }
  second.finish(8, {{"val/accuracy", 0.8}});

  REQUIRE(event_files(dir).size() == 1); // continued, not a second file
  const auto events = read_events(second.file());
  CHECK(events.front().file_version);
  const auto steps = steps_by_tag(events);
  CHECK(steps.at("train/loss") == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(steps.at("epoch/train/loss") == std::vector<int64_t>{3, 6});
  CHECK(steps.at("plots/plot") == std::vector<int64_t>{3, 6});
  CHECK(steps.at("config").size() == 1);
  CHECK(steps.at("_hparams_/session_start_info").size() == 1);
  CHECK(steps.at("_hparams_/experiment").size() == 1);
  CHECK(steps.at("_hparams_/session_end_info") == std::vector<int64_t>{8});
  CHECK(steps.at("final/val/accuracy") == std::vector<int64_t>{8});
}

// A save at an epoch's last step stands before that epoch's end: the history the resume keeps
// (history_records) lacks the epoch record of that step, which the resumed run writes again. Its
// event went as well: before, TensorBoard showed the epoch twice at one step.
TEST_CASE("resume at a step whose epoch record the history dropped drops that record's event too") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_resume_epoch_end");
  tp::Logger log;
  std::vector<tp::HistoryRecord> history;
  {
    tp::TensorBoardWriter first(dir, true, false, log);
    first.start(config());
    for (int64_t step = 1; step <= 3; ++step) {
      history.push_back(step_record(step));
      first.add(history.back());
    }
    history.push_back(epoch_record(3, 1)); // written after the save at step 3
    first.add(history.back());
  }
  const std::vector<tp::HistoryRecord> kept(history.begin(), history.begin() + 3); // the save saw 3 records
  tp::TensorBoardWriter second(dir, true, false, log);
  second.resume(3, kept);
  second.start(config());
  second.add(epoch_record(3, 1)); // the resumed run ends the epoch again
  second.add(step_record(4));
  const auto steps = steps_by_tag(read_events(second.file()));
  CHECK(steps.at("epoch/train/loss") == std::vector<int64_t>{3});
  CHECK(steps.at("train/loss") == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("resume writes again the kept records an event file lacks: none, or a torn tail") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_backfill");
  tp::Logger log;
  std::vector<tp::HistoryRecord> kept;
  for (int64_t step = 1; step <= 4; ++step) kept.push_back(step_record(step));

  SUBCASE("no event file yet (logging.tensorboard turned on at the resume)") {
    tp::TensorBoardWriter writer(dir, true, false, log);
    writer.resume(4, kept);
    writer.start(config());
    writer.add(step_record(5));
    CHECK(steps_by_tag(read_events(writer.file())).at("train/loss") == std::vector<int64_t>{1, 2, 3, 4, 5});
  }
  SUBCASE("a file whose last record was cut short (the disk filled up)") {
    fs::path file;
    {
      tp::TensorBoardWriter first(dir, true, false, log);
      first.start(config());
      for (int64_t step = 1; step <= 3; ++step) first.add(kept[static_cast<std::size_t>(step - 1)]);
      file = first.file();
    }
    fs::resize_file(file, fs::file_size(file) - 5); // step 3's record is torn
    tp::TensorBoardWriter writer(dir, true, false, log);
    writer.resume(4, kept);
    writer.start(config());
    CHECK(writer.file() == file);
    CHECK(steps_by_tag(read_events(file)).at("train/loss") == std::vector<int64_t>{1, 2, 3, 4});
  }
}

TEST_CASE("a write failure warns once, stops the writer and throws nothing") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_full");
  tp::Logger log;
  log.open_file(dir / "train.log");
  tp::TensorBoardWriter writer(dir, true, false, log);
  writer.start(config());
  const auto size = fs::file_size(writer.file());
  // A file size limit fails write() with EFBIG as a full disk fails it with ENOSPC.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN); // else the kernel's signal ends the process
  rlimit limited = old;
  limited.rlim_cur = static_cast<rlim_t>(size + 3000);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  for (int64_t step = 1; step <= 200; ++step) CHECK_NOTHROW(writer.add(step_record(step)));
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous_handler);
  const auto failed_size = fs::file_size(writer.file());
  writer.add(step_record(201)); // the writer stays off
  writer.finish(201, {});
  CHECK(fs::file_size(writer.file()) == failed_size);
  CHECK(failed_size <= size + 3000);

  const std::string text = tp::test::read_text(dir / "train.log");
  const std::string warning = "TensorBoard: writing a history record failed";
  CHECK(text.find(warning) != std::string::npos);
  CHECK(text.find(warning) == text.rfind(warning)); // once
  CHECK(text.find(writer.file().string()) != std::string::npos);
  // What was written before the failure reads back; a resume drops the torn tail.
  const tp::TfRecords records = tp::split_tfrecords(tp::test::read_text(writer.file()));
  CHECK(records.records.size() > 3);
}

TEST_CASE("the cost of one record, next to history.jsonl's (printed)") {
  const fs::path dir = tp::test::fresh_dir("tensorboard_writer_cost");
  tp::Logger log;
  tp::TensorBoardWriter writer(dir, true, false, log);
  writer.start(config());
  tp::History history(dir / "history", true);
  // A step record as the trainer writes it: 14 values.
  tp::HistoryRecord record{"step", {{"step", 0.0}, {"epoch", 1.0}, {"lr", 3e-3}, {"train/loss", 0.6931},
                                    {"train/loss/logits", 0.5}, {"train/loss/bbox", 0.19},
                                    {"throughput/samples_per_s", 812.5}, {"time/data_wait_s", 0.001},
                                    {"time/compute_s", 0.08}, {"time/step_s", 0.081}, {"memory/peak_mb", 512.0},
                                    {"train/grad_norm", 1.25}, {"amp/scale", 65536.0}, {"amp/skipped_steps", 0.0}}};
  constexpr int kRecords = 20000;
  auto seconds_per_record = [&](auto&& add) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1; i <= kRecords; ++i) {
      record.values.front().second = i;
      add();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRecords;
  };
  const double tensorboard = seconds_per_record([&] { writer.add(record); });
  const double jsonl = seconds_per_record([&] { history.add(record); });
  MESSAGE("TensorBoard: " << tensorboard * 1e6 << " us per 14-value record (" << fs::file_size(writer.file()) / kRecords
                          << " bytes); history.add (jsonl): " << jsonl * 1e6 << " us");
  CHECK(read_events(writer.file()).size() == kRecords + 3);
  CHECK(tensorboard < 200e-6); // a few microseconds expected; this only catches a pathology (an fsync per record)
}
