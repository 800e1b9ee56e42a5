#include "history_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "tp/framework/error.h"

namespace tp::detail {
namespace {

// A cursor over one line. Every failure names the 1-based column, which is what a person
// looking at a damaged line in an editor needs.
class LineParser {
 public:
  explicit LineParser(std::string_view text) : text_(text) {}

  HistoryRecord parse() {
    HistoryRecord record;
    bool have_kind = false;
    expect('{');
    if (!consume('}')) {
      do {
        const std::size_t key_column = pos_ + 1;
        std::string key = parse_string();
        expect(':');
        const bool duplicate =
            (key == "kind" && have_kind) ||
            std::any_of(record.values.begin(), record.values.end(), [&](const auto& v) { return v.first == key; });
        if (duplicate) fail_at(key_column, "key \"" + key + "\" appears twice");
        if (key == "kind") {
          skip_space();
          if (peek() != '"') fail("\"kind\" must be a string (\"step\" or \"epoch\")");
          record.kind = parse_string();
          have_kind = true;
        } else {
          record.values.emplace_back(std::move(key), parse_number_or_null());
        }
      } while (consume(','));
      expect('}');
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    if (!have_kind) fail_at(1, "the record has no \"kind\"");
    return record;
  }

 private:
  [[noreturn]] void fail_at(std::size_t column, const std::string& what) const {
    throw Error("column " + std::to_string(column) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_ + 1, what); }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool consume(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) {
      const std::string found = pos_ < text_.size() ? "'" + std::string(1, text_[pos_]) + "'" : "the end of the line";
      fail("expected '" + std::string(1, c) + "', found " + found);
    }
  }

  // History writes names as they are; the common escapes are accepted so a hand-edited line
  // still reads, \u escapes are not (no metric name needs one).
  std::string parse_string() {
    skip_space();
    if (peek() != '"') fail("expected a string in double quotes");
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        const char e = peek();
        static constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
        const std::size_t i = kFrom.find(e);
        if (e == '\0' || i == std::string_view::npos) fail("unsupported escape in a string");
        c = kTo[i];
        ++pos_;
      }
      out += c;
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }

  // JSON number grammar, checked before from_chars (which would also take "inf", "nan", "+1").
  double parse_number_or_null() {
    skip_space();
    if (text_.substr(pos_, 4) == "null") {
      pos_ += 4;
      return std::nan("");
    }
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (peek() == '-') ++pos_;
    bool ok = digits();
    if (ok && peek() == '.') {
      ++pos_;
      ok = digits();
    }
    if (ok && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      ok = digits();
    }
    double value = 0;
    if (ok) ok = std::from_chars(text_.data() + start, text_.data() + pos_, value).ec == std::errc{};
    if (!ok) fail_at(start + 1, "expected a number or null");
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

HistoryRecord parse_history_line(std::string_view line) { return LineParser(line).parse(); }

std::vector<HistoryRecord> read_history(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::error_code ec;
    throw Error("cannot read the run history " + file.string() + ": " +
                (std::filesystem::exists(file, ec) ? "it cannot be opened (check its permissions)"
                                                   : "the file does not exist") +
                ". It is written by the trainer (rank 0) from the first logged step; pass the run's "
                "output directory.");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<HistoryRecord> records;
  std::size_t begin = 0;
  for (std::size_t number = 1; begin < text.size(); ++number) {
    const std::size_t newline = text.find('\n', begin);
    const bool complete = newline != std::string::npos;
    const std::string_view line(text.data() + begin, (complete ? newline : text.size()) - begin);
    begin = complete ? newline + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    try {
      records.push_back(parse_history_line(line));
    } catch (const Error& e) {
      if (!complete) break; // still being appended
      throw Error(file.string() + ":" + std::to_string(number) + ": not a history record (" + e.what() +
                  "). Each line must be a flat JSON object such as {\"kind\":\"step\",\"step\":10,"
                  "\"train/loss\":0.5} with number or null values; fix or delete that line.");
    }
  }
  return records;
}

}  // namespace tp::detail
