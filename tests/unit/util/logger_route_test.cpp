// Logger::route sets the sink and the least level in one step (the review's finding: the
// inference library's set_log set them one after the other, so a line logged in between could
// reach the caller's new function at the old level).
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <string_view>
#include <thread>

#include "tp/framework/util/log.h"

TEST_CASE("Logger::route: no line below the new level reaches the new sink, while other threads log") {
  tp::Logger logger;
  std::atomic<int> old_sink_lines{0};
  logger.route([&](tp::LogLevel, std::string_view, std::string_view) { ++old_sink_lines; }, tp::LogLevel::Info);
  std::atomic<bool> stop{false};
  std::atomic<int> below_level_at_new_sink{0}, new_sink_lines{0}, writes{0};
  std::thread writer([&] {
    while (!stop.load()) {
      logger.write(tp::LogLevel::Info, "test", "an info line");
      logger.every_rank("a line every rank says");
      ++writes;
    }
  });
  // Many switches, each racing the writer: a two-step switch lets an INFO line through now and then.
  for (int round = 0; round < 2000; ++round) {
    logger.route([&](tp::LogLevel level, std::string_view, std::string_view) {
      ++new_sink_lines;
      if (level < tp::LogLevel::Error) ++below_level_at_new_sink;
    }, tp::LogLevel::Error);
    logger.write(tp::LogLevel::Error, "test", "an error line");
    logger.route([&](tp::LogLevel, std::string_view, std::string_view) { ++old_sink_lines; }, tp::LogLevel::Info);
    // Each round overlaps the writer: wait for its next lines before switching again.
    for (const int before = writes.load(); writes.load() == before;) std::this_thread::yield();
  }
  stop.store(true);
  writer.join();
  CHECK(below_level_at_new_sink.load() == 0);
  CHECK(new_sink_lines.load() == 2000); // exactly the error lines, each once
  CHECK(old_sink_lines.load() > 0);    // the writer did log between the switches
  CHECK(logger.least_level() == tp::LogLevel::Info);
}
