// Issue 58, item 10: toml++ caps the nesting of arrays and inline tables but not of dotted keys:
// `a.a.<100,000 parts> = 1` in a config (or in a run's mlflow/state.toml, read by mlflow-sync)
// overflowed the stack, a bare SIGSEGV. parse_toml bounds every kind of nesting first, and what
// stays under the bound parses exactly as toml++ parses it.
#include <string>

#include "tp/framework/config/load.h"
#include "tp/framework/config/toml_text.h"

#include "unit/config/config_test_util.h"

namespace {

std::string dotted_key(int parts) {
  std::string key = "a";
  for (int i = 1; i < parts; ++i) key += ".a";
  return key;
}

/// The message parse_toml throws for `text`, "" when it parses.
std::string refusal(const std::string& text) {
  try {
    (void)tp::parse_toml(text, "deep.toml");
  } catch (const toml::parse_error& e) {
    return std::string(e.description()) + " at " + std::to_string(e.source().begin.line) + ":" +
           std::to_string(e.source().begin.column);
  }
  return "";
}

}  // namespace

TEST_CASE("parse_toml refuses keys nested past the bound, however they nest, naming the place") {
  const std::string deep = refusal(dotted_key(100000) + " = 1\n");
  CHECK(deep.find("nest more than 128 levels deep") != std::string::npos);
  CHECK(deep.find(" at 1:") != std::string::npos);
  CHECK(refusal("x = 1\n[" + dotted_key(5000) + "]\n").find("at 2:") != std::string::npos);
  CHECK(refusal("[[" + dotted_key(5000) + "]]\n") != "");
  CHECK(refusal("t = {" + dotted_key(200) + " = 1}\n") != "");
  std::string inline_tables = "t = ";
  for (int i = 0; i < 200; ++i) inline_tables += "{a = ";
  CHECK(refusal(inline_tables + "1" + std::string(200, '}') + "\n") != "");
  // Parts spread over a key and the inline tables around it count together: 50 tables of 3 parts.
  std::string spread = "t = ";
  for (int i = 0; i < 50; ++i) spread += "{" + dotted_key(3) + " = ";
  CHECK(refusal(spread + "1" + std::string(50, '}') + "\n") != "");
  // At the bound it parses: 128 parts.
  CHECK(refusal(dotted_key(128) + " = 1\n") == "");
  CHECK(refusal(dotted_key(129) + " = 1\n") != "");
}

TEST_CASE("parse_toml reads what stays under the bound as toml++ does: dots in strings, numbers and dates are text") {
  const std::string text =
      "# a comment with many dots . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . .\n"
      "[train]\nlr = 0.001\nschedule = [0.1, 0.2, 0.3]\n\"dotted.name.in.quotes\" = 'a.b.c.d'\n"
      "when = 1979-05-27T07:32:00.999Z\n"
      "text = \"\"\"\nmany.dots.inside.a.multi.line.string.\n[not.a.table]\n\"\"\"\n"
      "[data.train.transform]\nsizes = [[1.5, 2.5], [3.5]]\nopts = {a.b = 1, c = {d.e = 2}}\n"
      "[[callbacks]]\ncomponent = 'org.x.y'\n";
  const toml::table ours = tp::parse_toml(text, "t.toml");
  CHECK(ours == toml::parse(std::string_view(text), std::string_view("t.toml")));
  CHECK(ours.at_path("data.train.transform.opts.c.d.e").value<int64_t>() == 2);
  // Many dots in values of a long line never count as nesting.
  std::string floats = "v = [";
  for (int i = 0; i < 1000; ++i) floats += "1.5, ";
  CHECK(refusal(floats + "2.5]\n") == "");
}

TEST_CASE("a run config with a 100,000-part key is a configuration error naming the file and line, not a crash") {
  const tp::ConfigError e = tp::test::expect_config_error(
      [] { (void)tp::load_run_config_from_string("[train]\nepochs = 1\n" + dotted_key(100000) + " = 1\n", "run.toml", {}, {}); });
  TP_CHECK_CONTAINS(std::string(e.what()), "run.toml:3:");
  TP_CHECK_CONTAINS(std::string(e.what()), "nest more than 128 levels deep");
}
