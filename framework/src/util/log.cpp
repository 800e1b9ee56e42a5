#include "tp/framework/util/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "tp/framework/util/bounded_text.h"

namespace tp {
namespace {

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &tm);
  return buffer;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}

}  // namespace

Logger::Logger(int rank, bool verbose) : rank_(rank), verbose_(verbose) {}

void Logger::open_file(const std::filesystem::path& file) {
  if (rank_ != 0) return;
  std::filesystem::create_directories(file.parent_path());
  std::lock_guard lock(mutex_);
  file_.open(file, std::ios::app);
}

void Logger::write(LogLevel level, std::string_view source, std::string_view message) {
  if (level == LogLevel::Debug && !verbose_) return;
  if (level < least_) return;
  if (rank_ != 0 && level < LogLevel::Error) return;
  std::string line = timestamp() + " [" + std::string(source) + "] " + level_name(level) + ": ";
  if (rank_ != 0) line += "rank " + std::to_string(rank_) + ": ";
  line += bounded_text(message);
  std::lock_guard lock(mutex_);
  // stderr keeps stdout free for the progress bar; lines are flushed so a crash loses none.
  std::cerr << line << std::endl;
  if (file_.is_open()) file_ << line << std::endl;
}

void Logger::every_rank(std::string_view message) {
  if (LogLevel::Info < least_) return;
  std::string line = timestamp() + " [host] info: ";
  if (rank_ != 0) line += "rank " + std::to_string(rank_) + ": ";
  line += bounded_text(message);
  std::lock_guard lock(mutex_);
  std::cerr << line << std::endl;
  if (file_.is_open()) file_ << line << std::endl;
}

void Logger::file_error(std::string_view label, std::string_view message) {
  const std::string line = timestamp() + " [host] " + std::string(label) + ": " + bounded_text(message);
  std::lock_guard lock(mutex_);
  if (file_.is_open()) file_ << line << std::endl;
}

void Logger::file_only(std::string_view message) {
  std::lock_guard lock(mutex_);
  if (file_.is_open()) file_ << message << std::endl;
}

}  // namespace tp
