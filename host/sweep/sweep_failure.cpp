#include "sweep/sweep_failure.h"

#include <fstream>
#include <system_error>

#include "tp/framework/error.h"

namespace tp::cli {
namespace {

constexpr std::size_t kMaxReason = 300; // one line of sweep.toml and of the summary

// The message's first sentence: the what and where; the advice after it is the log's to give.
std::string first_sentence(std::string text) {
  const std::size_t end = text.find(". ");
  if (end != std::string::npos) text.resize(end);
  while (!text.empty() && (text.back() == '.' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  if (text.size() > kMaxReason) text = text.substr(0, kMaxReason - 3) + "...";
  return text;
}

}  // namespace

std::uintmax_t train_log_size(const std::filesystem::path& cell_dir) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(cell_dir / "train.log", ec);
  return ec ? 0 : size;
}

std::string cell_failure_reason(const std::filesystem::path& cell_dir, std::uintmax_t log_offset, int exit_code,
                                bool killed) {
  std::ifstream in(cell_dir / "train.log", std::ios::binary);
  std::string last_error;
  if (in && log_offset <= train_log_size(cell_dir)) {
    // Only this attempt's lines: a retried cell's log holds the errors of the attempts before.
    in.seekg(static_cast<std::streamoff>(log_offset));
    static constexpr std::string_view kError = "] error: ";
    for (std::string line; std::getline(in, line);)
      if (const std::size_t at = line.find(kError); at != std::string::npos) last_error = line.substr(at + kError.size());
  }
  if (!last_error.empty()) return first_sentence(last_error);
  if (killed) return "killed by signal " + std::to_string(exit_code - kExitSignalBase);
  return "exit code " + std::to_string(exit_code) + ", no error in its train.log";
}

}  // namespace tp::cli
