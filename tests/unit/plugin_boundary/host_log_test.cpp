// host->log names its caller: every plugin shares one tp_host_t, so the host tags a line with the
// plugin whose call runs on the thread (the crash handler's PluginCallScope), and with nothing
// more than "plugin" on a thread of the plugin's own.
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

}  // namespace
