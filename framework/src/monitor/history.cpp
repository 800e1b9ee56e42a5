#include "tp/framework/monitor/history.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tp/framework/util/atomic_file.h"
#include "tp/framework/error.h"

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
  jsonl_.open(dir_ / "history.jsonl", std::ios::app);
  if (!jsonl_) throw Error("cannot open " + (dir_ / "history.jsonl").string() + " for writing.");
}

void History::add(HistoryRecord record) {
  if (!enabled_) return;
  std::string line = "{\"kind\":\"" + record.kind + "\"";
  for (const auto& [name, value] : record.values) {
    const std::string number = format_number(value);
    line += ",\"" + name + "\":" + (number.empty() ? "null" : number);
  }
  jsonl_ << line << "}\n" << std::flush;
  if (listener_) listener_(record);
  records_.push_back(std::move(record));
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

void History::resume(int64_t step) {
  if (!enabled_) return;
  jsonl_.close();
  const auto file = dir_ / "history.jsonl";
  std::ifstream in(file);
  std::string kept;
  records_.clear();
  for (std::string line; std::getline(in, line);) {
    HistoryRecord record = parse_line(line);
    double record_step = 0;
    for (const auto& [name, value] : record.values)
      if (name == "step") record_step = value;
    if (record.kind.empty() || record_step > static_cast<double>(step)) continue;
    kept += line + "\n";
    records_.push_back(std::move(record));
  }
  write_file_atomically(file, kept);
  jsonl_.open(file, std::ios::app);
  flush_csv();
}

void History::flush_csv() const {
  if (!enabled_) return;
  std::vector<std::string> columns;
  for (const auto& record : records_)
    for (const auto& [name, value] : record.values)
      if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(name);
  std::ostringstream csv;
  csv << "kind";
  for (const auto& c : columns) csv << ',' << c;
  csv << '\n';
  for (const auto& record : records_) {
    csv << record.kind;
    for (const auto& c : columns) {
      csv << ',';
      for (const auto& [name, value] : record.values)
        if (name == c) {
          csv << format_number(value);
          break;
        }
    }
    csv << '\n';
  }
  const std::string text = csv.str();
  write_file_atomically(dir_ / "history.csv", text.data(), text.size());
}

}  // namespace tp
