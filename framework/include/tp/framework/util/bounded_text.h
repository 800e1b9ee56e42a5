// Text from outside (a file name, a plugin's message, a config value) can be any length; one
// echoed whole made a 100 MB log line (issue 41, item 14). Lines the host prints are bounded.
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

}  // namespace tp
