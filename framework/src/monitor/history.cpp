#include "tp/framework/monitor/history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tp/framework/error.h"
#include "tp/framework/util/append_file.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/regular_file.h"
#include "tp/framework/util/write_error.h"
#include "tp/framework/util/write_fully.h"

namespace tp {

std::string format_number(double value) {
  if (!std::isfinite(value)) return "";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

History::History(std::filesystem::path run_dir, bool enabled) : dir_(std::move(run_dir)), enabled_(enabled) {
  if (!enabled_) return;
  std::filesystem::create_directories(dir_);
  open_jsonl();
}

History::~History() {
  if (fd_ >= 0) ::close(fd_);
}

void History::open_jsonl() {
  const auto file = dir_ / "history.jsonl";
  fd_ = open_for_appending(file);
}

void History::add(HistoryRecord record) {
  if (!enabled_) return;
  std::string line = "{\"kind\":\"" + record.kind + "\"";
  for (const auto& [name, value] : record.values) {
    const std::string number = format_number(value);
    line += ",\"" + name + "\":" + (number.empty() ? "null" : number);
  }
  append_line(line + "}\n", record);
  if (listener_) listener_(record);
  records_.push_back(std::move(record));
}

void History::append_line(const std::string& line, const HistoryRecord& record) {
  // One write() per line, no user-space buffer: a crashed process loses nothing it added, and a
  // kill -9 can tear only the last line (resume() drops it).
  struct stat before{};
  const bool sized = ::fstat(fd_, &before) == 0;
  if (const int error = write_fully(fd_, line.data(), line.size()); error != 0) {
    // A full disk can take half a line: cut it off, so the file stays a list of whole records
    // that the next run appends to.
    const bool cut = sized && ::ftruncate(fd_, before.st_size) == 0;
    std::string at;
    for (const auto& [name, value] : record.values)
      if (name == "step") at = " of step " + format_number(value);
    throw Error("cannot append the " + record.kind + " record" + at + " to " + (dir_ / "history.jsonl").string() +
                ": write failed: " + describe_write_error(error) +
                (cut ? " The file holds every record before this one, each complete"
                     : " Its last line may be cut short (the next --resume drops it)") +
                "; the checkpoints are not affected. Free space, then `--resume auto` continues from the newest "
                "checkpoint and writes the history after it again.");
  }
}

namespace {

// history.jsonl lines are flat objects this class wrote itself: "kind" plus numbers or null.
HistoryRecord parse_line(const std::string& line) {
  HistoryRecord record;
  std::size_t pos = 0;
  while ((pos = line.find('"', pos)) != std::string::npos) {
    const std::size_t end = line.find('"', pos + 1);
    if (end == std::string::npos || end + 1 >= line.size() || line[end + 1] != ':') break;
    const std::string key = line.substr(pos + 1, end - pos - 1);
    std::size_t value_start = end + 2;
    if (line[value_start] == '"') {
      const std::size_t value_end = line.find('"', value_start + 1);
      if (key == "kind") record.kind = line.substr(value_start + 1, value_end - value_start - 1);
      pos = value_end + 1;
      continue;
    }
    const std::size_t value_end = line.find_first_of(",}", value_start);
    const std::string value = line.substr(value_start, value_end - value_start);
    record.values.emplace_back(key, value == "null" ? std::nan("") : std::strtod(value.c_str(), nullptr));
    pos = value_end;
  }
  return record;
}

}  // namespace

std::vector<std::string> History::resume(int64_t step, std::optional<int64_t> saved_records) {
  if (!enabled_) return {};
  ::close(fd_);
  fd_ = -1;
  const auto file = dir_ / "history.jsonl";
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> warnings;
  std::string kept;
  records_.clear();
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t newline = text.find('\n', begin);
    if (newline == std::string::npos) {
      // Every line is written with its newline in one write(): a last line without one is what a
      // kill -9 or a full disk cut short. Its numbers may be cut too ("step":1 of "step":12), so
      // it is not read.
      warnings.push_back("resume: the last line of " + file.string() + " is incomplete (" +
                         std::to_string(text.size() - begin) + " bytes without a newline: the previous run was "
                         "killed or the disk filled while it was written); it is dropped");
      break;
    }
    const std::string line = text.substr(begin, newline - begin);
    begin = newline + 1;
    HistoryRecord record = parse_line(line);
    double record_step = 0;
    for (const auto& [name, value] : record.values)
      if (name == "step") record_step = value;
    if (record.kind.empty() || record_step > static_cast<double>(step)) continue;
    // Past the count the checkpoint saw: written after the save at its step (an epoch's end).
    if (saved_records && static_cast<int64_t>(records_.size()) >= *saved_records) continue;
    kept += line + "\n";
    records_.push_back(std::move(record));
  }
  write_file_atomically(file, kept);
  open_jsonl();
  // The records were replaced, not added to: history.csv is rewritten from them.
  csv_columns_.clear();
  csv_rows_ = 0;
  flush_csv();
  return warnings;
}

std::optional<std::string> drop_torn_last_line(const std::filesystem::path& file) {
  // Only a regular file is read: a FIFO planted in its place would block the read for good (the
  // history's open for appending refuses it, and a link, naming it).
  std::error_code status_error;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(file, status_error))) return std::nullopt;
  const std::vector<char> bytes = read_regular_file(file);
  const std::string text(bytes.begin(), bytes.end());
  if (text.empty() || text.back() == '\n') return std::nullopt;
  const std::size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  std::error_code ec;
  std::filesystem::resize_file(file, keep, ec);
  if (ec) throw Error("cannot cut the incomplete last line off " + file.string() + ": " + ec.message() + ".");
  return "the last line of " + file.string() + " was incomplete (" + std::to_string(text.size() - keep) +
         " bytes without a newline: an earlier run was killed or the disk filled while it was written); it is "
         "dropped, so this run's records start on a line of their own";
}

std::string History::csv_row(const HistoryRecord& record) const {
  std::string row = record.kind;
  for (const auto& c : csv_columns_) {
    row += ',';
    for (const auto& [name, value] : record.values)
      if (name == c) {
        row += format_number(value);
        break;
      }
  }
  return row + '\n';
}

bool History::append_csv(const std::string& rows) {
  // Appended only to the file this object wrote last, untouched since: anything else (removed,
  // replaced, a link or a FIFO planted, cut or grown) is rewritten whole, as before.
  const auto file = dir_ / "history.csv";
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<unsigned long>(st.st_ino) != csv_inode_ ||
      static_cast<std::size_t>(st.st_size) != csv_bytes_) {
    ::close(fd);
    return false;
  }
  const int error = write_fully(fd, rows.data(), rows.size());
  // A half-written row is cut off again, so the file stays whole rows (run_directory.md).
  const bool cut = error != 0 && ::ftruncate(fd, static_cast<off_t>(csv_bytes_)) == 0;
  ::close(fd);
  if (error != 0)
    throw Error("cannot append to " + file.string() + ": write failed: " + describe_write_error(error) +
                (cut ? " It holds every row before these, each complete" : " Its last row may be cut short") +
                "; history.jsonl and the checkpoints are not affected.");
  csv_bytes_ += rows.size();
  return true;
}

void History::flush_csv() {
  if (!enabled_) return;
  // Columns in first-seen order only grow while records are added: the new records say whether
  // a column appeared.
  std::vector<std::string> columns = csv_columns_;
  for (std::size_t r = csv_rows_; r < records_.size(); ++r)
    for (const auto& [name, value] : records_[r].values)
      if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(name);
  if (csv_rows_ > 0 && columns == csv_columns_) {
    std::string rows;
    for (std::size_t r = csv_rows_; r < records_.size(); ++r) rows += csv_row(records_[r]);
    if (rows.empty() || append_csv(rows)) {
      csv_rows_ = records_.size();
      return;
    }
  }
  csv_columns_ = std::move(columns);
  std::string text = "kind";
  for (const auto& c : csv_columns_) text += ',' + c;
  text += '\n';
  for (const auto& record : records_) text += csv_row(record);
  const auto file = dir_ / "history.csv";
  write_file_atomically(file, text.data(), text.size());
  struct stat st{};
  const bool known = ::lstat(file.c_str(), &st) == 0;
  csv_rows_ = known ? records_.size() : 0;  // unknown inode: rewrite next time
  csv_bytes_ = text.size();
  csv_inode_ = known ? static_cast<unsigned long>(st.st_ino) : 0;
}

}  // namespace tp
