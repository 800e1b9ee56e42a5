// sweep.toml: the sweep's own record of its cells, in the sweep directory. A cell counts as
// finished only when this record says "done", which the sweep writes after the cell's training
// process exited 0; nothing is inferred from the files a cell left behind.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tp::cli {

/// One cell's state. `status` is "running" (started; a sweep killed outright leaves this),
/// "done", "interrupted" (stopped by a signal after saving last.pt) or "failed".
struct CellRecord {
  std::string name;
  std::vector<std::string> overrides;
  std::string status;
  int exit_code = 0; ///< of its last training process (0 while running)
  std::string reason; ///< "failed": why, in one line (sweep_failure.h); "" otherwise
};

class SweepRecord {
 public:
  /// Reads `file`; a missing file is an empty record. Throws tp::Error naming the file when it
  /// does not parse or its cells are malformed (the message says to delete it to start over).
  static SweepRecord read(const std::filesystem::path& file);

  /// The cell named `name`, or null.
  const CellRecord* find(const std::string& name) const;
  /// Every cell, in the order they were first recorded (earlier grids' cells included).
  const std::vector<CellRecord>& cells() const { return cells_; }
  /// Adds or replaces the cell of the same name (new ones go last, so the file keeps grid order).
  void set(const CellRecord& cell);
  /// Rewrites `file` atomically with the sweep's command (`config`, `grid`, `sets`, recorded for
  /// people) and every cell, those of earlier grids included.
  void write(const std::filesystem::path& file, const std::string& config, const std::vector<std::string>& grid,
             const std::vector<std::string>& sets) const;

 private:
  std::vector<CellRecord> cells_;
};

}  // namespace tp::cli
