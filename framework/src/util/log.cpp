#include "tp/framework/util/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <utility>

#include "tp/framework/error.h"
#include "tp/framework/util/append_file.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/write_fully.h"

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

Logger::~Logger() {
  if (file_ >= 0) ::close(file_);
}

void Logger::open_file(const std::filesystem::path& file) {
  if (rank_ != 0) return;
  std::filesystem::create_directories(file.parent_path());
  const int fd = open_for_appending(file);
  std::lock_guard lock(mutex_);
  if (file_ >= 0) ::close(file_);
  file_ = fd;
}

void Logger::append(const std::string& line) {
  if (file_ < 0) return;
  const std::string text = line + "\n";
  // A log line that cannot be written (a full disk) is no reason to stop what it reports on.
  [[maybe_unused]] const int error = write_fully(file_, text.data(), text.size());
}

void Logger::route(Sink sink, LogLevel least) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
  least_.store(least);
}

void Logger::emit(const std::string& line, LogLevel level, std::string_view source, std::string_view message) {
  if (sink_) {
    try {
      sink_(level, source, message);
      return;
    } catch (...) {
      // A caller's sink that fails must not take the line, nor throw into a plugin's log call.
    }
  }
  // stderr keeps stdout free for the progress bar; lines are flushed so a crash loses none.
  std::cerr << line << std::endl;
}

void Logger::write(LogLevel level, std::string_view source, std::string_view message) {
  if (level == LogLevel::Debug && !verbose_) return;
  if (level < least_.load()) return;
  if (rank_ != 0 && level < LogLevel::Error) return;
  const std::string text = bounded_text(message);
  std::string line = timestamp() + " [" + std::string(source) + "] " + level_name(level) + ": ";
  if (rank_ != 0) line += "rank " + std::to_string(rank_) + ": ";
  line += text;
  std::lock_guard lock(mutex_);
  if (level < least_.load()) return; // again under the lock: route() may have raised it meanwhile
  emit(line, level, source, text);
  append(line);
}

void Logger::every_rank(std::string_view message) {
  if (LogLevel::Info < least_.load()) return;
  const std::string text = bounded_text(message);
  std::string line = timestamp() + " [host] info: ";
  if (rank_ != 0) line += "rank " + std::to_string(rank_) + ": ";
  line += text;
  std::lock_guard lock(mutex_);
  if (LogLevel::Info < least_.load()) return; // again under the lock, as in write()
  emit(line, LogLevel::Info, "host", text);
  append(line);
}

void Logger::file_error(std::string_view label, std::string_view message) {
  const std::string line = timestamp() + " [host] " + std::string(label) + ": " + bounded_text(message);
  std::lock_guard lock(mutex_);
  append(line);
}

void Logger::file_only(std::string_view message) {
  std::lock_guard lock(mutex_);
  append(std::string(message));
}

}  // namespace tp
