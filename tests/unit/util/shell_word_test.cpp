// shell_word(): a path inside a command a message tells a person to paste stays one word.
#include "tp/framework/util/shell_word.h"

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

namespace {

// What /bin/sh makes of `word`: its one argument, as printf '%s' writes it.
std::string as_the_shell_reads(const std::string& word) {
  FILE* pipe = ::popen(("printf '%s|' " + word).c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[256];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

}  // namespace

TEST_CASE("shell_word leaves a plain path as it is and quotes anything else into one word") {
  CHECK(tp::shell_word("/runs/exp-1/v1.2_a+b:c=d@e%f,g") == "/runs/exp-1/v1.2_a+b:c=d@e%f,g");
  CHECK(tp::shell_word("run dir") == "'run dir'");
  CHECK(tp::shell_word("") == "''");
  for (const std::string text : {"run dir", "it's", "$(touch pwned)", "a;b|c&d", "`x`", "back\\slash", "new\nline",
                                 "''", "*"}) {
    INFO(text);
    CHECK(as_the_shell_reads(tp::shell_word(text)) == text + "|");
  }
}
