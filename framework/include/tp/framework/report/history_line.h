// One line of a run's history.jsonl, parsed: the reader the plots use (tp::History writes the
// lines). `host tune lr` follows a child run's history with it while the child writes.
#pragma once

#include <string_view>

#include "tp/framework/monitor/history.h"

namespace tp {

/// Parses one history.jsonl line, `{"kind":"step","step":10,"train/loss":0.5,"val/loss":null}`,
/// exactly as tp::History writes it: a string "kind", then number-or-null values (null becomes
/// NaN), in their order. Throws tp::Error with a message that starts "column N: " for anything
/// else (a damaged or foreign line). Thread safety: [any]; cost ~1 us per line.
HistoryRecord parse_history_line(std::string_view line);

}  // namespace tp
