// The names of the classes an integer label field stands for (plugin ABI 1.12, tp_class_names_t):
// what a dataset lends, what a checkpoint keeps, what `host export` writes into the exported file
// and `host predict` puts beside each argmax.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/data/field_contracts.h"

namespace tp {

/// The longest class name the host takes, in bytes: a name is a label, not a document (ImageNet's
/// longest synset gloss is 121 bytes).
inline constexpr std::size_t kMaxClassNameBytes = 256;
/// The most classes a dataset may name: far above any label set (ImageNet-21k: 21,841), and a
/// bound on what a checkpoint and an export's metadata carry.
inline constexpr std::size_t kMaxClassNames = 1'000'000;

/// A label field and the names of its classes; empty when none are known.
struct ClassNames {
  std::string field;              ///< the integer label field ("label") whose value i means names[i]
  std::vector<std::string> names; ///< in class-id order
  bool empty() const noexcept { return names.empty(); }
  bool operator==(const ClassNames&) const = default;
};

/// Why `name` cannot be a class name, or "" when it can: empty, longer than kMaxClassNameBytes,
/// not valid UTF-8 (overlong forms and surrogates included), or holding a control character
/// (U+0000..U+001F, U+007F..U+009F), which would break a CSV row or a terminal line.
std::string class_name_problem(std::string_view name);

/// `classes` checked as a whole: at most kMaxClassNames names, each without a class_name_problem,
/// and a field name. Throws tp::Error naming the first bad name by its class id.
void check_class_names(const ClassNames& classes);

/// Why `classes` cannot name the classes a loss declares (plugin ABI 1.9): a class-id contract on
/// `classes.field` with a class_count other than the number of names; "" when none disagrees
/// (no names, no such contract, or a contract whose count is 0, not known to the loss).
std::string class_count_problem(const ClassNames& classes, const std::vector<FieldContract>& contracts);

}  // namespace tp
