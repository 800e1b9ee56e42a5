// history.csv as History::flush_csv keeps it (soak trial F4): rows appended while the columns are
// unchanged, the file rewritten when a column appears or a resume cuts the records; at every
// point the bytes equal those of a whole rewrite (the oracle below, the rewrite it replaced).
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tp/framework/monitor/history.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// What the whole rewrite wrote: kind, then every name in first-seen order; empty cells.
std::string rewritten(const std::vector<tp::HistoryRecord>& records) {
  std::vector<std::string> columns;
  for (const auto& record : records)
    for (const auto& [name, value] : record.values)
      if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(name);
  std::string text = "kind";
  for (const auto& c : columns) text += "," + c;
  text += "\n";
  for (const auto& record : records) {
    text += record.kind;
    for (const auto& c : columns) {
      text += ",";
      for (const auto& [name, value] : record.values)
        if (name == c) {
          text += tp::format_number(value);
          break;
        }
    }
    text += "\n";
  }
  return text;
}

ino_t inode(const fs::path& file) {
  struct stat st{};
  REQUIRE(::lstat(file.c_str(), &st) == 0);
  return st.st_ino;
}

/// One epoch of `steps` step records and its epoch record, with val/accuracy when `eval`.
void epoch(tp::History& history, int& step, int epoch_index, int steps, bool eval) {
  for (int s = 0; s < steps; ++s) {
    ++step;
    history.add({"step", {{"epoch", epoch_index}, {"step", step}, {"train/loss", 1.0 / step}}});
  }
  tp::HistoryRecord record{"epoch", {{"epoch", epoch_index + 1}, {"step", step}, {"train/loss", 0.5}}};
  if (eval) record.values.emplace_back("val/accuracy", 0.25 * epoch_index);
  history.add(record);
  history.flush_csv();
}

}  // namespace

TEST_CASE("history.csv: appended while the columns hold, the same bytes as a rewrite across a new column and a resume") {
  const fs::path dir = fs::temp_directory_path() / ("history_csv_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path csv = dir / "history.csv";
  int step = 0;
  {
    tp::History history(dir, true);
    epoch(history, step, 0, 3, false);
    CHECK(read_text(csv) == rewritten(history.records()));
    const ino_t first = inode(csv);
    epoch(history, step, 1, 3, false);
    CHECK(read_text(csv) == rewritten(history.records()));
    CHECK_MESSAGE(inode(csv) == first, "columns unchanged: the rows are appended, the file not replaced");
    epoch(history, step, 2, 3, true);  // val/accuracy: a new column, the file rewritten
    CHECK(read_text(csv) == rewritten(history.records()));
    const ino_t second = inode(csv);
    CHECK(second != first);
    epoch(history, step, 3, 3, true);
    epoch(history, step, 4, 3, true);
    CHECK(read_text(csv) == rewritten(history.records()));
    CHECK(inode(csv) == second);
    history.flush_csv();  // nothing new: unchanged
    CHECK(read_text(csv) == rewritten(history.records()));
  }
  SUBCASE("a resume keeps the records up to its step, exactly") {
    tp::History history(dir, true);
    const auto warnings = history.resume(/*step=*/6);  // the end of the second epoch
    CHECK(warnings.empty());
    REQUIRE(history.count() == 8);
    CHECK(read_text(csv) == rewritten(history.records()));
    CHECK(read_text(csv).find("val/accuracy") == std::string::npos);
    step = 6;
    const ino_t resumed = inode(csv);
    epoch(history, step, 2, 3, false);
    CHECK(inode(csv) == resumed);
    epoch(history, step, 3, 3, true);
    CHECK(read_text(csv) == rewritten(history.records()));
  }
  SUBCASE("a file removed or replaced behind its back is rewritten whole, never appended to") {
    tp::History history(dir, true);
    (void)history.resume(100);
    fs::remove(csv);
    epoch(history, step, 5, 2, true);
    CHECK(read_text(csv) == rewritten(history.records()));
    std::ofstream(csv, std::ios::trunc) << "someone else's\n";
    epoch(history, step, 6, 2, true);
    CHECK(read_text(csv) == rewritten(history.records()));
  }
  fs::remove_all(dir);
}
