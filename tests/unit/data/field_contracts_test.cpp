// FieldContractCheck and check_first_batch (data/field_contracts.h): what a loss's field
// contracts (plugin ABI 1.9) find in samples and batches, and the messages that name them.
#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "tp/framework/data/field_contracts.h"
#include "tp/framework/error.h"

#include "support/doctest_after_torch.h"

using tp::FieldContract;
using tp::FieldContractCheck;
using tp::NamedTensors;

namespace {

const std::vector<FieldContract> kDetection = {{FieldContract::Kind::kBoxesXyxy, "boxes", 0},
                                               {FieldContract::Kind::kClassIds, "labels", 3}};

at::Tensor boxes_of(std::vector<float> values) {
  const auto rows = static_cast<int64_t>(values.size() / 4);
  return at::tensor(values).view({rows, 4});
}

NamedTensors detection_sample(std::vector<float> boxes, std::vector<int64_t> labels) {
  return {{"image", at::zeros({3, 4, 4})}, {"boxes", boxes_of(std::move(boxes))}, {"labels", at::tensor(labels)}};
}

std::string problem_text(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

}  // namespace

TEST_CASE("corner boxes and class ids in range keep the contracts; x, y, w, h boxes do not") {
  FieldContractCheck good("org.example.loss", kDetection);
  good.add(detection_sample({10, 20, 30, 40, 0, 0, 5, 5}, {0, 2}), "train sample 0");
  CHECK(good.problems().empty());

  FieldContractCheck xywh("org.example.loss", kDetection);
  xywh.add(detection_sample({10, 20, 30, 40}, {1}), "train sample 0");
  xywh.add(detection_sample({20, 30, 5, 6, 40, 10, 8, 30}, {0, 1}), "train sample 4"); // both: w < x
  const std::vector<std::string> problems = xywh.problems();
  INFO(problem_text(problems));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("target field 'boxes': org.example.loss takes boxes as (x1, y1, x2, y2)") == 0);
  CHECK(problems[0].find("2 of 3 boxes, in 1 of 2 samples, are not") != std::string::npos);
  CHECK(problems[0].find("(first: train sample 4, box 0 = [20, 30, 5, 6])") != std::string::npos);
  CHECK(problems[0].find("Did you give x, y, w, h?") != std::string::npos);
}

TEST_CASE("a row of zeros is padding; a non-finite corner or a zero-width box breaks the contract") {
  FieldContractCheck check("org.example.loss", {kDetection[0]});
  check.add(detection_sample({0, 0, 0, 0, 1, 1, 2, 2}, {0, 0}), "train sample 0");
  CHECK(check.problems().empty());
  check.add(detection_sample({1, 1, std::nanf(""), 2, 5, 5, 5, 9}, {0, 0}), "train sample 1");
  const std::vector<std::string> problems = check.problems();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("2 of 3 boxes, in 1 of 2 samples") != std::string::npos);
  CHECK(problems[0].find("box 0 = [1, 1, nan, 2]") != std::string::npos);
}

TEST_CASE("a ragged batch places each bad box in its sample through the offsets") {
  // Samples 0 and 1 are fine; sample 2's second box is (x, y, w, h).
  NamedTensors batch{{"boxes", boxes_of({0, 0, 4, 4, 1, 1, 3, 3, 2, 2, 6, 6, 5, 5, 9, 9, 30, 30, 4, 4})},
                     {"boxes_offsets", at::tensor(std::vector<int64_t>{0, 1, 3, 5})},
                     {"labels", at::tensor(std::vector<int64_t>{0, 1, 2, 0, 1})},
                     {"labels_offsets", at::tensor(std::vector<int64_t>{0, 1, 3, 5})}};
  FieldContractCheck check("org.example.loss", kDetection);
  check.add(batch, "the first training batch", true);
  const std::vector<std::string> problems = check.problems();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("1 of 5 boxes, in 1 of 3 samples") != std::string::npos);
  CHECK(problems[0].find("(first: the first training batch, sample 2 of the batch, box 1 = [30, 30, 4, 4])") !=
        std::string::npos);
}

TEST_CASE("class ids below 0 or at the class count break the contract; a count of 0 checks the sign only") {
  FieldContractCheck bounded("org.example.loss", {kDetection[1]});
  bounded.add(detection_sample({}, {0, 3, -1}), "val sample 7");
  const std::vector<std::string> problems = bounded.problems();
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("takes class ids [0, 3), but 2 of 3 values, in 1 of 1 samples, are not") != std::string::npos);
  CHECK(problems[0].find("(first: val sample 7, value 1 = 3)") != std::string::npos);

  FieldContractCheck unbounded("org.example.loss", {{FieldContract::Kind::kClassIds, "labels", 0}});
  unbounded.add(detection_sample({}, {0, 300}), "val sample 0");
  CHECK(unbounded.problems().empty());
  unbounded.add(detection_sample({}, {-2}), "val sample 1");
  CHECK(problem_text(unbounded.problems()).find("class ids 0 or more") != std::string::npos);
}

TEST_CASE("a missing field, integer boxes or floating class ids are named as such") {
  FieldContractCheck check("org.example.loss", kDetection);
  check.add({{"boxes", at::zeros({2, 4}, at::kLong)}, {"labels", at::zeros({2})}}, "train sample 0");
  check.add({{"image", at::zeros({3})}}, "train sample 1");
  const std::string text = problem_text(check.problems());
  INFO(text);
  CHECK(text.find("train sample 0 gives Long [2, 4], not floating rows of 4 (and 1 more)") != std::string::npos);
  CHECK(text.find("train sample 0 gives Float values, not integer class ids (and 1 more)") != std::string::npos);
}

TEST_CASE("check_first_batch refuses a batch that breaks a contract with data.train's ConfigError") {
  const tp::LossDescription declared{kDetection, {}, 0.0};
  const NamedTensors good = detection_sample({1, 1, 3, 3}, {1});
  CHECK_NOTHROW(tp::check_first_batch("org.example.loss", declared, good));
  CHECK_NOTHROW(tp::check_first_batch("org.example.loss", {}, detection_sample({5, 5, 1, 1}, {9})));
  try {
    tp::check_first_batch("org.example.loss", declared, detection_sample({5, 5, 1, 1}, {9}));
    FAIL("no ConfigError");
  } catch (const tp::ConfigError& e) {
    const std::string message = e.what();
    CHECK(e.key_path() == "data.train");
    CHECK(message.find("Did you give x, y, w, h?") != std::string::npos);
    CHECK(message.find("class ids [0, 3)") != std::string::npos);
    CHECK(message.find("Nothing was trained.") != std::string::npos);
  }
}
