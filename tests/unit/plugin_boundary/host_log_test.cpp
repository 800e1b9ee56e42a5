// host->log names its caller: every plugin shares one tp_host_t, so the host tags a line with the
// plugin whose call runs on the thread (the crash handler's PluginCallScope), and with nothing
// more than "plugin" on a thread of the plugin's own.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/framework/util/log.h"

#include "support/doctest_after_torch.h"

namespace {

using namespace tp;

/// Whether the line of `lines` that holds `message` carries `tag` before it.
bool line_tagged(const std::string& lines, const std::string& message, const std::string& tag) {
  const std::size_t at = lines.find(message);
  if (at == std::string::npos) return false;
  const std::size_t newline = lines.rfind('\n', at);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return lines.substr(begin, at - begin).find(tag) != std::string::npos;
}

TEST_CASE("host->log names the plugin whose call is running on the thread; outside any, just [plugin]") {
  // Before, every plugin's line read "[plugin] info: ...": with twenty plugins loaded, whose?
  Logger logger;
  HostServices services(logger, ProcessPlace{});
  const tp_host_t* host = services.table();
  std::ostringstream captured;
  std::streambuf* const saved = std::cerr.rdbuf(captured.rdbuf());
  {
    const PluginCallScope scope("org.test.logger", "get_sample", 4);
    host->log(host, TP_LOG_WARNING, "from inside get_sample");
  }
  {
    const PluginCallScope scope("/some/dir/libfoo.so", "init", UINT64_MAX);
    host->log(host, TP_LOG_WARNING, "from inside init");
  }
  host->log(host, TP_LOG_WARNING, "from the plugin's own thread");
  std::cerr.rdbuf(saved);
  const std::string lines = captured.str();
  CAPTURE(lines);
  CHECK(line_tagged(lines, "from inside get_sample", "[plugin org.test.logger] warning: "));
  CHECK(line_tagged(lines, "from inside init", "[plugin libfoo.so] warning: "));
  CHECK(line_tagged(lines, "from the plugin's own thread", "[plugin] warning: "));
}

TEST_CASE("one host->log call stays one plugin message: every line tagged, control characters escaped") {
  // Plugin trial F12: a message's second line reached train.log and the terminal untagged, so a
  // plugin could print a line that reads as the host's, and its ESC and BEL reached the terminal.
  Logger logger;
  HostServices services(logger, ProcessPlace{});
  const tp_host_t* host = services.table();
  std::ostringstream captured;
  std::streambuf* const saved = std::cerr.rdbuf(captured.rdbuf());
  {
    const PluginCallScope scope("org.test.logger", "create", UINT64_MAX);
    host->log(host, TP_LOG_INFO, "note = first\n2026-01-01 00:00:00 [host] info: finished \x1b[31mred\r\nbell\a\n");
  }
  std::cerr.rdbuf(saved);
  const std::string lines = captured.str();
  CAPTURE(lines);
  CHECK(line_tagged(lines, "note = first", "[plugin org.test.logger] info: "));
  CHECK(line_tagged(lines, "2026-01-01 00:00:00 [host] info: finished \\u001B[31mred\n", "[plugin org.test.logger] info: "));
  CHECK(line_tagged(lines, "bell\\u0007\n", "[plugin org.test.logger] info: "));
  CHECK(lines.find('\x1b') == std::string::npos);
  CHECK(lines.find('\a') == std::string::npos);
  CHECK(lines.find('\r') == std::string::npos);
  // "\n" at the end ends the message: three lines, no empty fourth.
  CHECK(std::count(lines.begin(), lines.end(), '\n') == 3);
}

TEST_CASE("host->fail keeps a plugin's message one paragraph: later lines indented, control characters escaped") {
  // The message is printed inside the host's error ("host: error: plugin component ... failed in
  // ... : <message>"), on the terminal and in train.log.
  Logger logger;
  HostServices services(logger, ProcessPlace{});
  const tp_host_t* host = services.table();
  CHECK(host->fail(host, TP_ERR_IO, "cannot read\n2026-01-01 00:00:00 [host] info: done\x1b]0;title\a\n") == TP_ERR_IO);
  CHECK(HostServices::take_last_error() == "cannot read\n  2026-01-01 00:00:00 [host] info: done\\u001B]0;title\\u0007");
  CHECK(host->fail(host, TP_ERR_IO, "one line") == TP_ERR_IO);
  CHECK(HostServices::take_last_error() == "one line");
}

}  // namespace
