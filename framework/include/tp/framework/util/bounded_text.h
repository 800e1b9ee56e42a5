// Text from outside (a file name, a plugin's message, a config value) can be any length; one
// echoed whole made a 100 MB log line (issue 41, item 14). Lines the host prints are bounded, and a
// plugin's text has its control characters escaped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tp {

/// The longest message the logger and the host's error report print whole (16 KiB).
inline constexpr std::size_t kMaxMessageBytes = std::size_t{16} * 1024;

/// `text` when it is at most `limit` bytes; otherwise its first `limit` * 3/4 and last `limit` / 8
/// bytes around " ... [N bytes left out] ... ", so both ends of a long name stay readable.
std::string bounded_text(std::string_view text, std::size_t limit = kMaxMessageBytes);

/// `text` with what could drive a terminal or forge a line made visible: the C0 controls but tab
/// (and newline, while `keep_newlines`), DEL and the C1 controls U+0080-U+009F become `\u001B`-style
/// escapes, as config.toml writes them, and a byte that is not UTF-8 becomes `\xE9`. For text a
/// plugin hands the host (host->log, host->fail, its descriptor's strings), which a raw ESC could
/// recolour or retitle the terminal with.
/// Example:
///   escape_control_characters("red\x1b[31m\a");  // "red\u001B[31m\u0007"
std::string escape_control_characters(std::string_view text, bool keep_newlines = true);

}  // namespace tp
