// tp/cpp/value_names.h: "<prefix>0", "<prefix>1", ... built at compile time, for a metric's
// per-class value names. Value names cross the ABI as pointers into static storage
// (iface/metric.h, compute), so a metric cannot format them per instance; a constexpr table of
// them at namespace scope is that storage.
#ifndef TP_CPP_VALUE_NAMES_H
#define TP_CPP_VALUE_NAMES_H

#include <array>
#include <cstddef>

namespace tp::cpp {

/// `Count` names "<prefix><index>" (index 0 .. Count - 1, in decimal). Declare one as a constexpr
/// object at namespace scope, whose storage is static as compute()'s value names must be:
///   constexpr tp::cpp::IndexedValueNames<4096> kIouNames("iou_");
///   values.push_back({kIouNames[c], iou[c]});
/// `prefix` holds at most kPrefixMax characters; a longer one fails the constant evaluation
/// (a compile error), as does a Count beyond five digits.
template <std::size_t Count>
class IndexedValueNames {
 public:
  static constexpr std::size_t kPrefixMax = 10;
  static_assert(Count <= 100000, "indices past five digits do not fit a name");

  constexpr explicit IndexedValueNames(const char* prefix) : text_{} {
    std::size_t prefix_length = 0;
    while (prefix[prefix_length] != '\0') ++prefix_length;
    if (prefix_length > kPrefixMax) throw "IndexedValueNames: the prefix is longer than kPrefixMax";
    for (std::size_t index = 0; index < Count; ++index) {
      std::array<char, kWidth>& name = text_[index];
      std::size_t n = 0;
      for (; n < prefix_length; ++n) name[n] = prefix[n];
      std::size_t digits = 1;
      for (std::size_t rest = index / 10; rest != 0; rest /= 10) ++digits;
      std::size_t rest = index;
      for (std::size_t d = digits; d > 0; --d, rest /= 10) name[n + d - 1] = static_cast<char>('0' + rest % 10);
      name[n + digits] = '\0';
    }
  }

  /// The name of `index` (< Count), NUL-terminated, valid as long as the table.
  constexpr const char* operator[](std::size_t index) const { return text_[index].data(); }

  /// How many names the table holds.
  static constexpr std::size_t size() { return Count; }

 private:
  static constexpr std::size_t kWidth = kPrefixMax + 5 + 1;  // prefix, five digits, NUL
  std::array<std::array<char, kWidth>, Count> text_;
};

}  // namespace tp::cpp

#endif  // TP_CPP_VALUE_NAMES_H
