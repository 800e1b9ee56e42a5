#include "tp/framework/config/toml_text.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace tp {
namespace {

/// The nesting depth of TOML text, tracked lexically: a key's parts count one level each, and each
/// `[`/`{` opened in a value adds one below the key that owns it.
class NestingScan {
 public:
  explicit NestingScan(std::string_view text) : text_(text) {}

  /// Where the first key deeper than kMaxTomlNesting is, or line 0 when there is none.
  toml::source_position first_too_deep() {
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '#') {
        skip_to_line_end();
      } else if (c == '"' || c == '\'') {
        skip_string(c);
      } else {
        if (c == '\n') {
          if (open_.empty()) line_start_ = true;
          dots_ = 0;
          ++line_;
          column_ = 0;
        } else if (c == '.') {
          ++dots_;
        } else if (c == '=') {
          key_parts_ = dots_ + 1;  // the key just read owns the value that follows
          if (depth() + key_parts_ > kMaxTomlNesting) return here();
          dots_ = 0;
        } else if (c == '[' || c == '{') {
          if (open_.empty() && line_start_ && c == '[') {
            header_ = true;  // a table header: its parts are counted at its `]`
          } else {
            open_.push_back(key_parts_);
            if (depth() > kMaxTomlNesting) return here();
          }
          key_parts_ = 1;
          dots_ = 0;
        } else if (c == ']' || c == '}') {
          if (header_ && open_.empty()) {
            if (dots_ + 1 > kMaxTomlNesting) return here();
            header_ = false;
          } else if (!open_.empty()) {
            open_.pop_back();
          }
          dots_ = 0;
        } else if (c == ',') {
          dots_ = 0;
        }
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '[') line_start_ = false;
        advance();
      }
    }
    return {};
  }

 private:
  int depth() const {
    int total = 0;
    for (const int parts : open_) total += parts;
    return total;
  }
  toml::source_position here() const {
    return {static_cast<toml::source_index>(line_), static_cast<toml::source_index>(column_ + 1)};
  }
  void advance() {
    ++at_;
    ++column_;
  }
  void skip_to_line_end() {
    while (at_ < text_.size() && text_[at_] != '\n') advance();
  }
  // Skips a basic ("...", with escapes) or literal ('...') string, single- or multi-line: dots,
  // brackets and `=` inside it are text, not structure.
  void skip_string(char quote) {
    const bool multi = text_.substr(at_, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''");
    for (int i = 0; i < (multi ? 3 : 1); ++i) advance();
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '\\' && quote == '"') {
        advance();
        if (at_ < text_.size()) advance();
        continue;
      }
      if (c == '\n') {
        if (!multi) return;  // toml++ reports the unterminated string
        ++line_;
        column_ = 0;
        ++at_;
        continue;
      }
      if (c == quote && (!multi || text_.substr(at_, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''"))) {
        for (int i = 0; i < (multi ? 3 : 1); ++i) advance();
        return;
      }
      advance();
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
  std::size_t line_ = 1, column_ = 0;
  bool line_start_ = true, header_ = false;
  int dots_ = 0, key_parts_ = 1;
  std::vector<int> open_;  // per open `[`/`{` in a value: the parts of the key that owns it
};

}  // namespace

toml::table parse_toml(std::string_view text, std::string_view source) {
  const toml::source_position too_deep = NestingScan(text).first_too_deep();
  if (too_deep.line != 0) {
    const std::string message = "keys and tables nest more than " + std::to_string(kMaxTomlNesting) +
                                " levels deep (the parts of dotted keys and table names, and the inline tables "
                                "and arrays around them, counted together)";
    throw toml::parse_error(message.c_str(), too_deep,
                            source.empty() ? nullptr : std::make_shared<const std::string>(source));
  }
  return toml::parse(text, source);
}

toml::table parse_toml_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw toml::parse_error("File could not be opened for reading", toml::source_position{},
                                   std::make_shared<const std::string>(file.string()));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_toml(text, file.string());
}

}  // namespace tp
