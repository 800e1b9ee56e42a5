#include "tp/framework/monitor/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "tp/framework/config/flatten.h"
#include "tp/framework/config/write.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/event_file_resume.h"
#include "tp/framework/monitor/tfrecord.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/log.h"
#include "tp/framework/util/own_directory.h"
#include "tp/framework/util/write_fully.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A step record's values keep their names; other kinds' are prefixed, so the epoch's train/loss
// (the epoch mean) and the step's (the logging window's) are two series, not one with two values
// at the epoch's last step.
std::string tag_of(const std::string& kind, const std::string& name) {
  return kind == "step" ? name : kind + "/" + name;
}

std::optional<int64_t> step_of(const HistoryRecord& record) {
  for (const auto& [name, value] : record.values)
    if (name == "step") return static_cast<int64_t>(value);
  return std::nullopt;
}

// A history record and the event holding it share (step, first tag): "step" for a step record,
// "epoch/epoch" for an epoch record, and so on.
using RecordKey = std::pair<int64_t, std::string>;

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw Error("cannot read " + file.string() + ": " + std::strerror(errno) + ".");
  return bytes;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().filename().string().find("tfevents") != std::string::npos)
      files.push_back(entry.path());
  std::sort(files.begin(), files.end()); // <time> is zero-padded: name order is age order
  return files;
}

// The hparams plugin takes numbers, bools and strings: the config's leaves by their TOML type,
// anything else (arrays, dates) as its TOML text ("[0.9, 0.999]").
std::vector<HParam> config_hparams(const toml::table& config) {
  std::vector<HParam> out;
  for (const auto& [name, value] : flatten_config(config)) {
    switch (value.type) {
      case toml::node_type::boolean: out.push_back({name, value.literal == "true"}); break;
      case toml::node_type::integer:
      case toml::node_type::floating_point: out.push_back({name, std::stod(value.literal)}); break;
      case toml::node_type::string: out.push_back({name, value.display}); break;
      default: out.push_back({name, value.literal}); break;
    }
  }
  return out;
}

std::string new_file_name() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  char name[320];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()),
                host);
  return name;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const fs::path& run_dir, bool enabled, bool images, Logger& log)
    : dir_(run_dir / "tensorboard"), enabled_(enabled), images_(images), log_(log) {}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

template <class Body>
void TensorBoardWriter::guarded(const char* what, Body&& body) {
  if (!enabled_) return;
  try {
    body();
  } catch (const std::exception& e) {
    enabled_ = false;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    log_.warn(std::string("TensorBoard: ") + what + " failed, so no more events are written in this run: " +
              e.what() + " Training goes on; history.jsonl, the plots and the checkpoints are not affected. A "
              "later `--resume auto` writes the missing steps again from history.jsonl.");
  }
}

void TensorBoardWriter::resume(int64_t step, const std::vector<HistoryRecord>& kept) {
  guarded("rewriting the event files for the resume", [&] {
    resume_step_ = step;
    // The history records kept at the resume step: an event there of any other (an epoch's end
    // after a save at its last step) is written again by the resumed run, so it goes.
    std::set<std::string> tags_at_step;
    for (const HistoryRecord& record : kept)
      if (step_of(record) == step && !record.values.empty()) tags_at_step.insert(tag_of(record.kind, record.values.front().first));
    std::set<RecordKey> present;
    const std::vector<fs::path> files = fs::exists(dir_) ? event_files(dir_) : std::vector<fs::path>{};
    for (const fs::path& file : files) {
      // Reads and rewrites the whole file once per resume (images make it the size of the PNGs).
      const ResumedEventFile kept_events = resume_event_file(read_bytes(file), step, &tags_at_step);
      present.insert(kept_events.present.begin(), kept_events.present.end());
      last_image_step_ = std::max(last_image_step_, kept_events.last_image_step);
      if (kept_events.changed) write_file_atomically(file, kept_events.bytes);
    }
    if (!files.empty()) file_ = files.back();
    for (const HistoryRecord& record : kept) {
      const std::optional<int64_t> at = step_of(record);
      if (!at || record.values.empty()) continue;
      if (!present.count({*at, tag_of(record.kind, record.values.front().first)})) backfill_.push_back(record);
      for (const auto& [name, value] : record.values)
        if (record.kind == "epoch" && name == "train/loss") epoch_train_loss_ = value;
    }
  });
}

void TensorBoardWriter::start(const toml::table& config) {
  guarded("opening the event file", [&] {
    make_own_directory(dir_); // never a planted link's target (security trial F6)
    const bool fresh = file_.empty();
    if (fresh) {
      if (!resume_step_ && !event_files(dir_).empty())
        log_.warn("TensorBoard: " + dir_.string() + " already holds event files of an earlier run; TensorBoard shows "
                  "them together with this run's. Use a new run.output_dir, or --resume auto to continue that run.");
      file_ = dir_ / new_file_name();
      for (int n = 1; fs::exists(file_); ++n) file_ = dir_ / (new_file_name() + "." + std::to_string(n));
    }
    fd_ = ::open(file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0) throw Error("cannot open " + file_.string() + ": " + std::strerror(errno) + ".");
    if (fresh || fs::file_size(file_) == 0) append(event_file_version(now_seconds())); // every file starts with it
  });
  if (!active()) return;
  for (const HistoryRecord& record : std::exchange(backfill_, {})) add(record);
  guarded("writing the config", [&] {
    hparams_ = config_hparams(config);
    append(event_text(now_seconds(), 0, kConfigTag, "```toml\n" + to_toml_text(config) + "```"));
    append(event_hparams_start(now_seconds(), hparams_));
  });
}

void TensorBoardWriter::add(const HistoryRecord& record) {
  if (!active()) return;
  const std::optional<int64_t> step = step_of(record);
  if (!step) return;
  guarded("writing a history record", [&] {
    std::vector<std::pair<std::string, double>> values;
    values.reserve(record.values.size());
    for (const auto& [name, value] : record.values) {
      values.emplace_back(tag_of(record.kind, name), value);
      if (record.kind == "epoch" && name == "train/loss") epoch_train_loss_ = value;
    }
    append(event_scalars(now_seconds(), *step, values));
  });
}

void TensorBoardWriter::add_images(const std::vector<fs::path>& pngs, int64_t step) {
  if (!images_ || !active() || pngs.empty() || step <= last_image_step_) return;
  guarded("writing the plots", [&] {
    std::vector<std::pair<std::string, std::string>> images;
    images.reserve(pngs.size());
    for (const fs::path& png : pngs) images.emplace_back(std::string(kPlotsPrefix) + png.stem().string(), read_bytes(png));
    append(event_images(now_seconds(), step, images));
    last_image_step_ = step;
  });
}

void TensorBoardWriter::finish(int64_t step, const std::vector<std::pair<std::string, double>>& final_metrics) {
  if (!active()) return;
  guarded("writing the final metrics", [&] {
    std::vector<std::pair<std::string, double>> values;
    const auto has_train_loss = [&] {
      return std::any_of(final_metrics.begin(), final_metrics.end(), [](const auto& m) { return m.first == "train/loss"; });
    };
    if (epoch_train_loss_ && !has_train_loss()) values.emplace_back(std::string(kFinalPrefix) + "train/loss", *epoch_train_loss_);
    for (const auto& [name, value] : final_metrics) values.emplace_back(std::string(kFinalPrefix) + name, value);
    std::vector<std::string> tags;
    tags.reserve(values.size());
    for (const auto& value : values) tags.push_back(value.first);
    const double now = now_seconds();
    if (!values.empty()) append(event_scalars(now, step, values));
    append(event_hparams_experiment(now, hparams_, tags));
    append(event_hparams_end(now, step));
  });
}

void TensorBoardWriter::append(const std::string& event) {
  // One write() per record, no user-space buffer: the record is the kernel's as soon as this
  // returns, so a crash of the process loses nothing (no fsync: a power cut may, as for
  // history.jsonl). Cost: docs/logging.md.
  const std::string record = tfrecord_frame(event);
  if (const int error = write_fully(fd_, record.data(), record.size()); error != 0)
    throw Error("cannot write " + file_.string() + ": " + std::strerror(error) + ".");
}

}  // namespace tp
