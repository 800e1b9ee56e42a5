#include "tp/framework/util/bounded_text.h"

namespace tp {

std::string bounded_text(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return std::string(text);
  const std::size_t head = limit / 4 * 3;
  const std::size_t tail = limit / 8;
  return std::string(text.substr(0, head)) + " ... [" + std::to_string(text.size() - head - tail) +
         " bytes left out] ... " + std::string(text.substr(text.size() - tail));
}

}  // namespace tp
