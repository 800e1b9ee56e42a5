// host predict's class columns (engine/prediction/class_columns.h): the argmax and probability of
// softmax or sigmoid scores, and no class for a row whose scores are NaN.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/prediction/class_columns.h"

#include <doctest/doctest.h>

namespace {

at::Tensor column(const std::vector<std::pair<std::string, at::Tensor>>& columns, const std::string& name) {
  for (const auto& [n, t] : columns)
    if (n == name) return t;
  FAIL("no column " << name);
  return {};
}

}  // namespace

TEST_CASE("class columns: the argmax of each row, and -1 (no class) where the row's scores are NaN") {
  // Security trial F15: a model with NaN weights gave every image argmax 0, so the class column
  // named class 0 for each, as confidently as for a real answer.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor logits = at::tensor({0.1f, 2.0f, -1.0f, nan, nan, nan, 3.0f, nan, 0.0f}).reshape({3, 3});
  for (const bool sigmoid : {false, true}) {
    CAPTURE(sigmoid);
    std::vector<std::pair<std::string, at::Tensor>> columns;
    tp::detail::append_class_columns(columns, "logits", logits, sigmoid);
    const at::Tensor argmax = column(columns, "logits.argmax");
    CHECK(argmax[0].item<int64_t>() == 1);
    CHECK(argmax[1].item<int64_t>() == -1);
    CHECK(argmax[2].item<int64_t>() == -1);  // one NaN is enough to spoil a softmax row
    CHECK(std::isnan(column(columns, "logits.prob")[1].item<float>()));
  }
  CHECK(tp::detail::is_classification("logits", logits));
  CHECK(tp::detail::is_classification("aux_logits", logits));
  CHECK_FALSE(tp::detail::is_classification("scores", logits));
  CHECK_FALSE(tp::detail::is_classification("logits", logits.reshape({-1})));
}
