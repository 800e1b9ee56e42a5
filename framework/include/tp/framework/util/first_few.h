// Long lists in error messages: the first few items and a count, so that a checkpoint of another
// model (hundreds of tensors) gives a message one can read (issue 41, item 14).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tp {

/// The first `shown` of `items` joined by ", ", followed by ", ... (N in all)" when there are
/// more; "" for none.
std::string first_few(const std::vector<std::string>& items, std::size_t shown = 5);

}  // namespace tp
