#include "shard_pattern.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>

#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

using tp::cpp::Failure;

struct Sequence;

/// One piece of a pattern: literal text, a list of alternatives, or a numeric range.
struct Piece {
  enum class Kind { kText, kList, kRange } kind = Kind::kText;
  std::string text;                                   // kText
  std::vector<std::unique_ptr<Sequence>> choices;     // kList
  int64_t lo = 0, hi = 0, step = 1;                   // kRange
  int width = 0;                                      // kRange: zero padding, 0 = none
};

/// Pieces in a row: every name is one choice of each piece, concatenated.
struct Sequence {
  std::vector<Piece> pieces;
};

/// Parses one pattern into a Sequence; throws with the pattern and position on a malformed one.
class PatternParser {
 public:
  PatternParser(const std::string& pattern, const char* key) : pattern_(pattern), key_(key) {}

  Sequence parse() {
    Sequence top = sequence(/*inside_braces=*/false);
    if (at_ < pattern_.size()) fail("a '}' at character " + std::to_string(at_ + 1) + " closes no '{'");
    return top;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Failure(TP_ERR_CONFIG, std::string("webdataset: ") + key_ + " = '" + pattern_ + "': " + what +
                                     ". Write shard names as webdataset does, e.g. "
                                     "\"data/train-{000000..000127}.tar\" or \"data/{a,b}.tar\"");
  }

 private:
  // Text up to the end, or (inside braces) up to the ',' or '}' that ends this alternative.
  Sequence sequence(bool inside_braces) {
    Sequence seq;
    std::string text;
    auto flush = [&] {
      if (text.empty()) return;
      Piece piece;
      piece.text = std::move(text);
      seq.pieces.push_back(std::move(piece));
      text.clear();
    };
    while (at_ < pattern_.size()) {
      const char c = pattern_[at_];
      if (c == '\\' && at_ + 1 < pattern_.size()) {
        text += pattern_[at_ + 1];
        at_ += 2;
      } else if (c == '{') {
        flush();
        seq.pieces.push_back(group());
      } else if (c == '}' || (inside_braces && c == ',')) {
        break;  // the end of this alternative; outside braces, parse() reports the stray '}'
      } else {
        text += c;
        ++at_;
      }
    }
    flush();
    return seq;
  }

  // A brace group starting at '{': a list, a range, or literal text.
  Piece group() {
    const std::size_t open = at_++;
    // Parsing recurses once per level: ~16,000 nested braces overflowed the stack (a bare SIGSEGV).
    if (++depth_ > kMaxBraceNesting)
      fail("the '{' at character " + std::to_string(open + 1) + " nests braces more than " +
           std::to_string(kMaxBraceNesting) + " deep");
    std::vector<std::unique_ptr<Sequence>> choices;
    for (;;) {
      choices.push_back(std::make_unique<Sequence>(sequence(/*inside_braces=*/true)));
      if (at_ >= pattern_.size()) fail("the '{' at character " + std::to_string(open + 1) + " is never closed");
      if (pattern_[at_++] == '}') break;
    }
    --depth_;
    const std::string raw = pattern_.substr(open, at_ - open);
    Piece piece;
    if (choices.size() > 1) {
      piece.kind = Piece::Kind::kList;
      piece.choices = std::move(choices);
    } else if (!range(raw.substr(1, raw.size() - 2), &piece)) {
      piece.text = raw;  // `{x}`, `{a..e}`: braceexpand keeps them as written
    }
    return piece;
  }

  // Whether `body` is lo..hi or lo..hi..step with decimal integers; fills `piece` when it is.
  bool range(const std::string& body, Piece* piece) const {
    std::vector<std::string> parts;
    std::size_t from = 0;
    for (std::size_t dots = body.find(".."); dots != std::string::npos; dots = body.find("..", from)) {
      parts.push_back(body.substr(from, dots - from));
      from = dots + 2;
    }
    parts.push_back(body.substr(from));
    if (parts.size() != 2 && parts.size() != 3) return false;
    int64_t values[3] = {0, 0, 1};
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (!integer(parts[i], /*allow_sign=*/i < 2, &values[i])) return false;
    if (values[2] == 0) fail("the range {" + body + "} has a step of 0");
    piece->kind = Piece::Kind::kRange;
    piece->lo = values[0];
    piece->hi = values[1];
    piece->step = values[2];
    // braceexpand pads when lo or hi is written with a leading zero ("0" alone is not one).
    auto padded = [](const std::string& s) {
      const std::string digits = s[0] == '-' ? s.substr(1) : s;
      return digits.size() > 1 && digits[0] == '0';
    };
    if (padded(parts[0]) || padded(parts[1]))
      piece->width = static_cast<int>(std::max(parts[0].size(), parts[1].size()));
    return true;
  }

  // A decimal integer of at most 18 digits (so no arithmetic on it overflows), maybe signed.
  bool integer(const std::string& s, bool allow_sign, int64_t* out) const {
    const std::size_t start = allow_sign && !s.empty() && s[0] == '-' ? 1 : 0;
    if (s.size() == start || s.find_first_not_of("0123456789", start) != std::string::npos) return false;
    if (s.size() - start > 18) fail("the number '" + s + "' in a range has more than 18 digits");
    *out = std::stoll(s);
    return true;
  }

  const std::string& pattern_;
  const char* key_;
  std::size_t at_ = 0;
  int depth_ = 0;  // braces open around the parse position
};

// How many names a piece or sequence gives, saturated at kMaxShards + 1 (the caller only asks
// whether it is within the limit, and the product of several groups would overflow).
std::size_t count_names(const Sequence& seq);
std::size_t count_piece(const Piece& piece) {
  constexpr std::size_t kTooMany = kMaxShards + 1;
  switch (piece.kind) {
    case Piece::Kind::kText: return 1;
    case Piece::Kind::kRange: {
      const uint64_t span = piece.hi >= piece.lo ? static_cast<uint64_t>(piece.hi - piece.lo)
                                                 : static_cast<uint64_t>(piece.lo - piece.hi);
      const uint64_t n = span / static_cast<uint64_t>(piece.step) + 1;
      return n > kTooMany ? kTooMany : static_cast<std::size_t>(n);
    }
    case Piece::Kind::kList: {
      std::size_t total = 0;
      for (const auto& choice : piece.choices) total = std::min(kTooMany, total + count_names(*choice));
      return total;
    }
  }
  return 1;
}
std::size_t count_names(const Sequence& seq) {
  constexpr std::size_t kTooMany = kMaxShards + 1;
  std::size_t total = 1;
  for (const Piece& piece : seq.pieces) {
    const std::size_t n = count_piece(piece);
    total = n == 0 ? 0 : (total > kTooMany / n ? kTooMany : std::min(kTooMany, total * n));
  }
  return total;
}

std::string number_text(int64_t value, int width) {
  char text[32];
  std::snprintf(text, sizeof text, "%0*lld", width, static_cast<long long>(value));
  return text;
}

std::vector<std::string> expand_sequence(const Sequence& seq);

// Every name one piece alone gives, in order.
std::vector<std::string> expand_piece(const Piece& piece) {
  switch (piece.kind) {
    case Piece::Kind::kText: return {piece.text};
    case Piece::Kind::kRange: {
      std::vector<std::string> numbers;
      const int64_t direction = piece.hi >= piece.lo ? 1 : -1;
      for (int64_t v = piece.lo; direction > 0 ? v <= piece.hi : v >= piece.hi; v += direction * piece.step)
        numbers.push_back(number_text(v, piece.width));
      return numbers;
    }
    case Piece::Kind::kList: {
      std::vector<std::string> names;
      for (const auto& choice : piece.choices)
        for (std::string& name : expand_sequence(*choice)) names.push_back(std::move(name));
      return names;
    }
  }
  return {};
}

// The names a sequence gives: the product of its pieces, the first varying slowest. Each piece
// is expanded once, and pieces with a single name (text, `{x}`, `{5..5}`) are gathered into a
// suffix that is appended when the next piece with several names comes, so the work is the
// number of names times the few (at most log2 kMaxShards) pieces that multiply them; appending
// each of a thousand `{x}` to 100,000 names one at a time took minutes (a fuzzer timeout).
std::vector<std::string> expand_sequence(const Sequence& seq) {
  std::vector<std::string> names{""};
  std::string suffix;
  for (const Piece& piece : seq.pieces) {
    std::vector<std::string> choices = expand_piece(piece);
    if (choices.size() == 1) {
      suffix += choices.front();
      continue;
    }
    std::vector<std::string> longer;
    longer.reserve(names.size() * choices.size());
    for (const std::string& head : names)
      for (const std::string& choice : choices) longer.push_back(head + suffix + choice);
    names = std::move(longer);
    suffix.clear();
  }
  for (std::string& name : names) name += suffix;
  return names;
}

}  // namespace

std::vector<std::string> expand_shard_pattern(const std::string& pattern, const char* key) {
  PatternParser parser(pattern, key);
  if (pattern.empty()) parser.fail("the pattern is empty, so it names no shard");
  const Sequence seq = parser.parse();
  const std::size_t count = count_names(seq);
  if (count > kMaxShards)
    parser.fail("it expands to more than " + std::to_string(kMaxShards) +
                " shard names; check the range (a digit too many?) or split the data set");
  std::vector<std::string> names = expand_sequence(seq);
  for (const std::string& name : names)
    if (name.empty()) parser.fail("it expands to an empty name (an empty item of a `{a,}` list?)");
  return names;
}

}  // namespace tp::webdataset
