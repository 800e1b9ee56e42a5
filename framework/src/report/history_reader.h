// Reads history.jsonl back for the plots. The reader accepts exactly what tp::History writes
// (framework/src/monitor/history.cpp): one flat JSON object per line, a string "kind" and
// number-or-null values, so a damaged or foreign file is reported instead of half-plotted.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "tp/framework/monitor/history.h"

namespace tp::detail {

/// Parses one line: `{"kind":"step","step":10,"train/loss":0.5,"val/loss":null}`. Null becomes
/// NaN; values keep their order. Throws tp::Error with a message that starts "column N: ".
HistoryRecord parse_history_line(std::string_view line);

/// Reads every record of `file` (blank lines are skipped). A last line without its newline that
/// does not parse is dropped: the trainer appends while `host plot` may be reading.
/// Throws tp::Error naming `file` for a missing or unreadable file, and `file:LINE` for a line
/// that does not parse.
std::vector<HistoryRecord> read_history(const std::filesystem::path& file);

}  // namespace tp::detail
