#include "tp/framework/report/history_line.h"

#include "history_reader.h"

namespace tp {

HistoryRecord parse_history_line(std::string_view line) { return detail::parse_history_line(line); }

}  // namespace tp
