#include "tp/framework/callbacks/history.h"

#include <algorithm>
#include <charconv>
#include <cmath>
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
  records_.push_back(std::move(record));
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
