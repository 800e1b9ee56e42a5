// The datasets' shared text rules (plugins/datasets/common: listing_text.h, stable_hash.h), which
// image_folder, segmentation_folder, the shard writer and the two caches each had a copy of: the
// copies of has_extension disagreed on a file named exactly like an ending, and the caches' FNV-1a
// started from 1469598103934665603, not FNV's offset basis 14695981039346656037.
#include <string>
#include <vector>

#include "listing_text.h"
#include "stable_hash.h"

#include <doctest/doctest.h>

TEST_CASE("fnv1a_64 is FNV-1a 64 (the published test vectors)") {
  CHECK(tp::datasets::fnv1a_64("") == 0xcbf29ce484222325ULL);
  CHECK(tp::datasets::fnv1a_64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(tp::datasets::fnv1a_64("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("has_extension is torchvision's name.lower().endswith(endings)") {
  const std::vector<std::string> endings{".jpg", ".PNG"};
  CHECK(tp::datasets::has_extension("a.jpg", endings));
  CHECK(tp::datasets::has_extension("A.JPG", endings));
  CHECK(tp::datasets::has_extension("b.png", endings));
  CHECK(tp::datasets::has_extension(".png", endings)); // torchvision keeps it; segmentation_folder did not
  CHECK_FALSE(tp::datasets::has_extension("apng", endings));
  CHECK_FALSE(tp::datasets::has_extension("a.jpg.txt", endings));
  CHECK_FALSE(tp::datasets::has_extension("png", endings));
  CHECK_FALSE(tp::datasets::has_extension("a.jpg", {}));
}

TEST_CASE("lower_case and trim") {
  CHECK(tp::datasets::lower_case("Path,LABEL") == "path,label");
  CHECK(tp::datasets::lower_case("\xc3\x89") == "\xc3\x89"); // bytes outside ASCII unchanged
  CHECK(tp::datasets::trim(" \t a b \r\n") == "a b");
  CHECK(tp::datasets::trim("\v\f") == "");
  CHECK(tp::datasets::trim("x") == "x");
}
