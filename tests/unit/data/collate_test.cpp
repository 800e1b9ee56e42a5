// collate(): stacking, field checks with useful messages, release of sample buffers.
// LibTorch headers come before doctest (a glog CHECK would replace doctest's).
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <vector>

#include "test_sources.h"
#include "tp/framework/data/collate.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

using tp::NamedTensors;

namespace {

std::vector<NamedTensors> samples_from(tp::test::MemorySource& src, std::vector<uint64_t> idx) {
  std::vector<NamedTensors> out;
  tp_worker_ctx_t ctx{};
  for (uint64_t i : idx) out.push_back(src.get(i, ctx));
  return out;
}

std::string collate_error(std::vector<NamedTensors> samples, std::vector<uint64_t> idx = {}) {
  try {
    tp::collate(std::move(samples), tp::CollateOptions{idx});
  } catch (const tp::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("collate: stacks every field along a new dim 0, in the first sample's order") {
  tp::test::MemorySource src(tp::test::MemorySource::Options().size(8));
  auto samples = samples_from(src, {5, 2, 7});
  CHECK(src.probe().live == 3);
  NamedTensors batch = tp::collate(std::move(samples));
  CHECK(samples.empty());
  CHECK(src.probe().live == 0);  // the copy released every sample buffer
  REQUIRE(batch.size() == 4);
  CHECK(batch[0].first == "x");
  CHECK(batch[1].first == "seed");
  CHECK(batch[2].first == "y");
  CHECK(batch[3].first == "worker");
  CHECK(batch[0].second.sizes() == at::IntArrayRef{3});
  CHECK(batch[2].second.sizes() == at::IntArrayRef{3, 2});
  CHECK((batch[0].second.scalar_type() == at::kLong));
  CHECK(batch[0].second[0].item<int64_t>() == 5);
  CHECK(batch[0].second[1].item<int64_t>() == 2);
  CHECK(batch[0].second[2].item<int64_t>() == 7);
  CHECK(batch[2].second[2][0].item<float>() == doctest::Approx(3.5));
}

TEST_CASE("collate: a non-contiguous field is stacked by value") {
  auto base = at::arange(6, at::kFloat).reshape({2, 3});
  auto other = at::arange(6, 12, at::kFloat).reshape({2, 3});
  std::vector<NamedTensors> samples{{{"a", base.t()}}, {{"a", other.t()}}};
  NamedTensors batch = tp::collate(std::move(samples));
  CHECK(batch[0].second.sizes() == at::IntArrayRef{2, 3, 2});
  CHECK(at::equal(batch[0].second[0], base.t()));
}

TEST_CASE("collate: mismatches name the field, the sample and both values") {
  auto s = [](std::vector<std::pair<std::string, at::Tensor>> f) { return NamedTensors(f); };
  const std::vector<uint64_t> idx{40, 41, 42};

  SUBCASE("shape") {
    const std::string msg = collate_error(
        {s({{"img", at::zeros({3, 4})}}), s({{"img", at::zeros({3, 4})}}),
         s({{"img", at::zeros({3, 5})}})},
        idx);
    CHECK(msg.find("'img'") != std::string::npos);
    CHECK(msg.find("sample 2 (dataset index 42)") != std::string::npos);
    CHECK(msg.find("sample 0 (dataset index 40)") != std::string::npos);
    CHECK(msg.find("[3, 5]") != std::string::npos);
    CHECK(msg.find("[3, 4]") != std::string::npos);
  }
  SUBCASE("dtype") {
    const std::string msg = collate_error(
        {s({{"label", at::zeros({}, at::kLong)}}), s({{"label", at::zeros({}, at::kInt)}})});
    CHECK(msg.find("'label'") != std::string::npos);
    CHECK(msg.find("sample 1") != std::string::npos);
    CHECK(msg.find("Long") != std::string::npos);
    CHECK(msg.find("Int") != std::string::npos);
  }
  SUBCASE("names and order") {
    const std::string msg = collate_error(
        {s({{"a", at::ones({1})}, {"b", at::ones({1})}}),
         s({{"b", at::ones({1})}, {"a", at::ones({1})}})});
    CHECK(msg.find("'b'") != std::string::npos);
    CHECK(msg.find("'a'") != std::string::npos);
    CHECK(msg.find("sample 1") != std::string::npos);
  }
  SUBCASE("field count") {
    const std::string msg = collate_error(
        {s({{"a", at::ones({1})}}), s({{"a", at::ones({1})}, {"b", at::ones({1})}})});
    CHECK(msg.find("2 fields") != std::string::npos);
  }
  SUBCASE("undefined tensor") {
    CHECK(collate_error({s({{"a", at::Tensor()}})}).find("undefined") != std::string::npos);
  }
  SUBCASE("no samples") {
    CHECK(collate_error({}).find("no samples") != std::string::npos);
  }
}

TEST_CASE("collate: samples are released even when collation fails") {
  tp::test::MemorySource src(tp::test::MemorySource::Options().size(4));
  auto samples = samples_from(src, {0, 1});
  samples.push_back({{"x", at::zeros({2}, at::kLong)}});  // wrong field count
  CHECK_THROWS_AS(tp::collate(std::move(samples)), tp::Error);
  CHECK(samples.empty());
  CHECK(src.probe().live == 0);
}
