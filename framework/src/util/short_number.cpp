#include "tp/framework/util/short_number.h"

#include <cmath>
#include <cstdio>

namespace tp {

std::string short_number(double value, int digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[40];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

}  // namespace tp
