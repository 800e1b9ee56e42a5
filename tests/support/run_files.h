// Checks on what a run left in its directory after a kill -9, a full disk or a signal
// (docs/hardening.md, "Every file the host writes"): history.jsonl made of whole records,
// TensorBoard event files made of whole records, and no writer's temporary left behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "tp/framework/monitor/tfrecord.h"
#include "tp/framework/report/history_line.h"
#include "tp/framework/util/stale_temporaries.h"

#include <doctest/doctest.h>

namespace tp::test {

/// The steps of the "step" records of `history` (history.jsonl), in file order, after checking
/// that the file ends with a newline and that every line is a whole record (the strict parser of
/// the plots: a torn or merged line fails it). `allow_torn_tail`: a last line without its newline
/// is accepted unread (a writer killed right now may have left it; the next resume drops it).
inline std::vector<int64_t> whole_history_steps(const std::filesystem::path& history, bool allow_torn_tail = false) {
  const std::string text = read_text(history);
  std::vector<int64_t> steps;
  std::size_t begin = 0;
  for (int number = 1; begin < text.size(); ++number) {
    const std::size_t newline = text.find('\n', begin);
    if (newline == std::string::npos) {
      CHECK_MESSAGE(allow_torn_tail, history.string() << ": the last line has no newline: " << text.substr(begin));
      break;
    }
    const std::string line = text.substr(begin, newline - begin);
    begin = newline + 1;
    try {
      const HistoryRecord record = parse_history_line(line);
      if (record.kind == "step")
        for (const auto& [name, value] : record.values)
          if (name == "step") steps.push_back(static_cast<int64_t>(value));
    } catch (const std::exception& e) {
      FAIL_CHECK(history.string() << ":" << number << " is not a whole record (" << std::string(e.what())
                                  << "): " << line);
    }
  }
  return steps;
}

/// The event files below `run_dir`/tensorboard that do not consist of whole TFRecords, with what
/// is wrong (empty when every file is whole).
inline std::string torn_event_files(const std::filesystem::path& run_dir) {
  std::ostringstream out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir / "tensorboard", ec)) {
    const std::string bytes = read_text(entry.path());
    const TfRecords records = split_tfrecords(bytes);
    if (records.valid_bytes != bytes.size())
      out << entry.path().string() << ": whole records up to byte " << records.valid_bytes << " of " << bytes.size()
          << "\n";
  }
  return out.str();
}

/// Every writer's temporary (util/stale_temporaries.h: .tmp-<pid>, .link-<pid>, .pending-<pid>.pt,
/// .partial-<pid>) anywhere below `dir`, one path per line; empty when there is none.
inline std::string temporaries_below(const std::filesystem::path& dir) {
  std::string found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec))
    if (temporary_pid(it->path().filename().string()) > 0) found += it->path().string() + "\n";
  return found;
}

}  // namespace tp::test
