// The run's log: timestamped lines to stderr and, on rank 0, to <run dir>/train.log.
// Only rank 0 writes INFO and below; every rank writes errors, prefixed with its rank, so a
// failure on rank 3 is never silent (ARCH-2).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace tp {

enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

/// Thread-safe line logger. One per process; passed by reference (no global logger).
class Logger {
 public:
  /// Receives each line the logger would print to stderr: its level, its source tag and its
  /// bounded text, without timestamp or rank (the inference library's caller's own logger).
  using Sink = std::function<void(LogLevel level, std::string_view source, std::string_view message)>;

  /// `rank` decides who prints INFO (rank 0 only); `verbose` enables DEBUG.
  explicit Logger(int rank = 0, bool verbose = false);
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  /// Also append every line rank 0 prints to `file` (created with its directories, mode 0666
  /// less the umask). Throws tp::Error naming the file when it cannot be opened, and when it is a
  /// symbolic link: a log is never written through a link, which could point at any file.
  void open_file(const std::filesystem::path& file);
  /// Writes one line. `source` is a short tag ("host", a plugin id) shown in brackets.
  void write(LogLevel level, std::string_view source, std::string_view message);
  void info(std::string_view message) { write(LogLevel::Info, "host", message); }
  void warn(std::string_view message) { write(LogLevel::Warning, "host", message); }
  void error(std::string_view message) { write(LogLevel::Error, "host", message); }
  /// An INFO line every rank prints, prefixed with its rank (others print only errors): for the
  /// rare lines a rank says about itself, such as that it waits for another (dataset prepare).
  void every_rank(std::string_view message);
  /// Only to the file (for the resolved config echo and other bulky records).
  void file_only(std::string_view message);
  /// An error line as error() writes it (timestamp, bounded text), labelled `label` ("error",
  /// "configuration error"), to the file only: for the error that ends a command, which main()
  /// prints to stderr itself.
  void file_error(std::string_view label, std::string_view message);
  int rank() const { return rank_; }
  LogLevel least_level() const { return least_.load(); }
  /// From now on, drops every line below `least` (the inference library's default is Warning: a
  /// program embedding it prints no plugin INFO lines; the host keeps the default, Debug) and hands
  /// every line write() and every_rank() print to `sink` instead of stderr, one at a time (under
  /// the logger's lock: a sink must not log through this logger); an empty sink restores stderr.
  /// A sink that throws loses its line to stderr instead. The file, if any, still gets it. Both in
  /// one step: no line reaches `sink` at the old level (tp::infer::set_log, which a service may
  /// call while its models log from other threads).
  void route(Sink sink, LogLevel least);

 private:
  int rank_;
  bool verbose_;
  std::atomic<LogLevel> least_{LogLevel::Debug}; ///< atomic: a caller may change it while others log
  std::mutex mutex_;
  Sink sink_; ///< under mutex_; empty: stderr
  int file_ = -1; ///< the log file, O_APPEND; -1 when none
  /// Appends `line` and a newline to the file in one write (under mutex_); a failed write is
  /// dropped, as a full disk must not stop the training the log describes.
  void append(const std::string& line);
  /// Prints `line` to stderr, or hands its parts to the sink (under mutex_).
  void emit(const std::string& line, LogLevel level, std::string_view source, std::string_view message);
};

}  // namespace tp
