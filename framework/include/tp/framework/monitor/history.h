// The run's history: one record per logged step and one per epoch, written by rank 0 to
// <run dir>/history.jsonl (appended and flushed per record, so a crash loses nothing) and
// <run dir>/history.csv (rewritten atomically at each epoch end, since its columns grow when the
// first evaluation adds val/* metrics).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
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
  /// Appends a record to both files, then hands it to the listener.
  void add(HistoryRecord record);
  /// `listener` sees every record add() writes from now on (the TensorBoard writer mirrors the
  /// history this way, so no record can reach one and not the other).
  void listen(std::function<void(const HistoryRecord&)> listener) { listener_ = std::move(listener); }
  /// Resuming: reloads history.jsonl, drops the records written after optimizer step `step`
  /// (the interrupted run's tail, which the resumed run will write again), rewrites both files.
  void resume(int64_t step);
  /// Rewrites history.csv from all records (columns: kind, then every name in first-seen order).
  void flush_csv() const;
  const std::vector<HistoryRecord>& records() const { return records_; }

 private:
  std::filesystem::path dir_;
  bool enabled_;
  std::ofstream jsonl_;
  std::vector<HistoryRecord> records_;
  std::function<void(const HistoryRecord&)> listener_;
};

/// Formats a double for CSV/JSON: shortest round-trip text; NaN/Inf as JSON null / empty CSV cell.
std::string format_number(double value);

}  // namespace tp
