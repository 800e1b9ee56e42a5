// tp/cpp/value_names.h: a metric's per-class value names, built at compile time into static
// storage (iface/metric.h's compute hands the host pointers to them).
#include "tp/cpp/value_names.h"

#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <string>

namespace {

constexpr tp::cpp::IndexedValueNames<10001> kNames("iou_");
constexpr tp::cpp::IndexedValueNames<3> kLongPrefix("per_class_");

TEST_CASE("IndexedValueNames: '<prefix><index>' in decimal, every index, each unique and NUL-terminated") {
  CHECK(std::string(kNames[0]) == "iou_0");
  CHECK(std::string(kNames[9]) == "iou_9");
  CHECK(std::string(kNames[10]) == "iou_10");
  CHECK(std::string(kNames[149]) == "iou_149");
  CHECK(std::string(kNames[1000]) == "iou_1000");
  CHECK(std::string(kNames[10000]) == "iou_10000");
  CHECK(std::string(kLongPrefix[2]) == "per_class_2");
  std::set<std::string> all;
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    CHECK(std::strlen(kNames[i]) == 4 + std::to_string(i).size());
    all.insert(kNames[i]);
  }
  CHECK(all.size() == 10001);
  // Built by the compiler, not at start-up: the table is a constant expression.
  static_assert(kNames[123][4] == '1' && kNames[123][6] == '3' && kNames[123][7] == '\0');
}

}  // namespace
