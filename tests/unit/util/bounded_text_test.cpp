// Lines the host prints are bounded (util/bounded_text.h): a 50 MB file name echoed into a message
// made a 100 MB line in train.log and on stderr (issue 41, item 14). The logger keeps both ends of
// such a message and says how much it left out; short messages pass unchanged.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/first_few.h"
#include "tp/framework/util/log.h"

#include "support/test_paths.h"

#include <doctest/doctest.h>

TEST_CASE("bounded_text keeps short text whole and both ends of long text, saying how much it left out") {
  CHECK(tp::bounded_text("a short message") == "a short message");
  const std::string exact(tp::kMaxMessageBytes, 'x');
  CHECK(tp::bounded_text(exact) == exact);
  const std::string name = "/data/" + std::string(50'000'000, 'a') + "/tail.png";
  const std::string bounded = tp::bounded_text("cannot read " + name + ": File name too long");
  CHECK(bounded.size() < tp::kMaxMessageBytes + 64);
  CHECK(bounded.starts_with("cannot read /data/aaa"));
  CHECK(bounded.ends_with("/tail.png: File name too long"));
  CHECK(bounded.find(" bytes left out] ... ") != std::string::npos);
}

TEST_CASE("escape_control_characters makes ESC, BEL, CR, DEL, C1 controls and non-UTF-8 bytes visible") {
  // Plugin trial F12: a plugin's log line recoloured the terminal (a raw ESC) and rang its bell.
  CHECK(tp::escape_control_characters("plain caf\xc3\xa9 text\twith a tab") == "plain caf\xc3\xa9 text\twith a tab");
  CHECK(tp::escape_control_characters("red\x1b[31m bell\a cr\r del\x7f") == "red\\u001B[31m bell\\u0007 cr\\u000D del\\u007F");
  CHECK(tp::escape_control_characters("csi\xc2\x9b" "2J nel\xc2\x85") == "csi\\u009B2J nel\\u0085");  // C1, UTF-8 encoded
  CHECK(tp::escape_control_characters("caf\xe9") == "caf\\xE9");                                // Latin-1, not UTF-8
  CHECK(tp::escape_control_characters("two\nlines") == "two\nlines");
  CHECK(tp::escape_control_characters("two\nlines", false) == "two\\u000Alines");
}

TEST_CASE("the logger writes a 50 MB message as one bounded line, to the file and to stderr alike") {
  const auto dir = std::filesystem::path(tp::test::build_dir()) / "test-runs" / "bounded_log";
  std::filesystem::remove_all(dir);
  {
    tp::Logger log;
    log.open_file(dir / "train.log");
    log.warn("sample 7: cannot read " + std::string(50'000'000, 'b') + ".png");
    log.info("the next line");
  }
  std::ifstream in(dir / "train.log");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() < tp::kMaxMessageBytes + 128);
  CHECK(lines[0].find("warning: sample 7: cannot read bbb") != std::string::npos);
  CHECK(lines[0].ends_with("b.png"));
  CHECK(lines[1].ends_with("info: the next line"));
}

TEST_CASE("first_few names five and counts the rest") {
  CHECK(tp::first_few({}) == "");
  CHECK(tp::first_few({"'a'", "'b'"}) == "'a', 'b'");
  const std::vector<std::string> many(12, "'w'");
  CHECK(tp::first_few(many) == "'w', 'w', 'w', 'w', 'w', ... (12 in all)");
}
