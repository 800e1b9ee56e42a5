// The table `host verify` prints: one row per check as it finishes (a long run shows its
// progress), the reason and any notes indented beneath it.
#include <cmath>
#include <cstdio>

#include "verify/verify.h"

namespace tp::cli::verify {

const char* status_name(Status status) {
  switch (status) {
    case Status::kPass: return "PASS";
    case Status::kFail: return "FAIL";
    case Status::kSkip: return "SKIP";
  }
  return "?";
}

std::string format_value(double value) {
  char text[32];
  // Counts print whole; measurements in 3 significant digits.
  if (std::isfinite(value) && value == std::floor(value) && std::abs(value) < 1e9)
    std::snprintf(text, sizeof text, "%.0f", value);
  else
    std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

void print_header(const std::string& config, const std::filesystem::path& work_dir) {
  std::printf("host verify %s\n  work directory %s (a failed check keeps its runs and logs there)\n\n",
              config.c_str(), work_dir.c_str());
  std::printf("%-13s %-6s %6s  %-30s %s\n", "check", "result", "time", "measured", "threshold");
  std::fflush(stdout);
}

void print_row(const CheckResult& row) {
  std::printf("%-13s %-6s %5.1fs  %-30s %s\n", row.check.c_str(), status_name(row.status), row.seconds,
              row.measured.c_str(), row.threshold.c_str());
  if (!row.reason.empty()) std::printf("    %s\n", row.reason.c_str());
  for (const std::string& note : row.notes) std::printf("    %s\n", note.c_str());
  std::fflush(stdout); // rows appear as checks finish, also when stdout is a pipe
}

}  // namespace tp::cli::verify
