#include "tp/framework/util/first_few.h"

#include <algorithm>

namespace tp {

std::string first_few(const std::vector<std::string>& items, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < std::min(items.size(), shown); ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > shown) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out;
}

}  // namespace tp
