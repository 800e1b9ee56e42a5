// The run's history: one record per logged step and one per epoch, written by rank 0 to
// <run dir>/history.jsonl (appended with one write() per record, so a crash loses nothing and a
// kill -9 can tear only the last line) and
// <run dir>/history.csv (at each epoch end: the new rows appended in one write() while the columns
// are unchanged, the whole file rewritten atomically when a record brings a new column, as the
// first evaluation's val/* metrics do, and on resume; soak trial F4: rewriting it every epoch cost
// O(rows) I/O per epoch).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tp {

/// One history row: kind ("step" | "epoch") and named values in insertion order.
struct HistoryRecord {
  std::string kind;
  std::vector<std::pair<std::string, double>> values;
};

class History {
 public:
  /// `enabled` = false (ranks other than 0) makes every call a no-op.
  History(std::filesystem::path run_dir, bool enabled);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;
  /// Appends a record to history.jsonl, then hands it to the listener. A failed write (a full
  /// disk, a quota, `ulimit -f`) throws tp::Error naming the file, the record, the OS error and
  /// what is intact, after cutting the half-written line off again (exit 1).
  void add(HistoryRecord record);
  /// `listener` sees every record add() writes from now on (the TensorBoard writer mirrors the
  /// history this way, so no record can reach one and not the other).
  void listen(std::function<void(const HistoryRecord&)> listener) { listener_ = std::move(listener); }
  /// Resuming: reloads history.jsonl, drops the records written after optimizer step `step`
  /// (the interrupted run's tail, which the resumed run will write again) and a last line without
  /// its newline (torn by a kill -9 or a full disk: not read, since its numbers may be cut short),
  /// rewrites both files atomically. `saved_records`, the count the checkpoint recorded when it
  /// was saved (absent in older files), keeps at most that many: an epoch's end records step S
  /// after a save at step S that stands before it, and the resumed run ends that epoch again.
  /// Returns the warnings to log (the torn line).
  [[nodiscard]] std::vector<std::string> resume(int64_t step, std::optional<int64_t> saved_records = std::nullopt);
  /// Records written so far (a resumed run's kept ones included): what a checkpoint records.
  int64_t count() const { return static_cast<int64_t>(records_.size()); }
  /// Brings history.csv up to date with all records (columns: kind, then every name in first-seen
  /// order). The bytes are always those a whole rewrite gives; while no new column appeared and the
  /// file is still the one this object wrote (same inode and size, a regular file), only the rows
  /// since the last call are appended (one write(), O_APPEND | O_NOFOLLOW); otherwise the file is
  /// replaced atomically. A failed append cuts the file back to its whole rows and throws tp::Error.
  void flush_csv();
  const std::vector<HistoryRecord>& records() const { return records_; }

 private:
  void open_jsonl();
  void append_line(const std::string& line, const HistoryRecord& record);
  std::string csv_row(const HistoryRecord& record) const;
  bool append_csv(const std::string& rows);

  std::filesystem::path dir_;
  bool enabled_;
  int fd_ = -1; ///< history.jsonl, O_APPEND
  std::vector<HistoryRecord> records_;
  std::function<void(const HistoryRecord&)> listener_;
  // What history.csv holds since this object last wrote it: the first csv_rows_ records under
  // csv_columns_, csv_bytes_ long, at inode csv_inode_ (csv_rows_ = 0: not written yet).
  std::vector<std::string> csv_columns_;
  std::size_t csv_rows_ = 0;
  std::size_t csv_bytes_ = 0;
  unsigned long csv_inode_ = 0;
};

/// Cuts a last line without its newline (what a kill -9 or a full disk leaves) off the history
/// file `file`, so that a run starting afresh in that directory appends its records on lines of
/// their own instead of merging the first into the torn one (a resume drops the line itself,
/// History::resume). Returns the warning to log, or nullopt when the file is absent, empty or ends
/// with a newline. Throws tp::Error naming the file when it cannot be read or cut. Cost: one read
/// of the file, at start.
std::optional<std::string> drop_torn_last_line(const std::filesystem::path& file);

/// Formats a double for CSV/JSON: shortest round-trip text; NaN/Inf as JSON null / empty CSV cell.
std::string format_number(double value);

}  // namespace tp
