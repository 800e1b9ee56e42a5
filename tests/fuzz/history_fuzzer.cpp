// Fuzz target: the history.jsonl line parser behind `host plot`. Every input must parse or
// throw tp::Error; nothing else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "report/history_reader.h"
#include "tp/framework/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)tp::detail::parse_history_line(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const tp::Error&) {
    // The expected way to reject a line.
  }
  return 0;
}
