// A dataset's declaration of its sample groups (plugin ABI 1.10, tp_dataset_v1_t::sample_groups)
// as the host reads it: what passes and, for each malformed declaration, the refusal that says
// what is wrong (DatasetProxy::parse_sample_groups; the loader and `host plugins check` use it).
#include <cstdint>
#include <string>
#include <vector>

#include "support/doctest_after_torch.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"

namespace {

std::string refusal(const std::vector<uint64_t>& ends, uint64_t size, bool null_array = false) {
  try {
    (void)tp::DatasetProxy::parse_sample_groups(null_array ? nullptr : ends.data(), ends.size(), size);
  } catch (const tp::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sample_groups: a well-formed declaration is taken as given; none for an empty dataset") {
  const std::vector<uint64_t> ends = {3, 4, 10};
  CHECK(tp::DatasetProxy::parse_sample_groups(ends.data(), ends.size(), 10) == ends);
  CHECK(tp::DatasetProxy::parse_sample_groups(nullptr, 0, 0).empty());
}

TEST_CASE("sample_groups: each malformed declaration is refused, saying what is wrong") {
  CHECK(refusal({}, 10).find("no group for a dataset of 10 samples") != std::string::npos);
  CHECK(refusal({10}, 10, true).find("NULL pointer") != std::string::npos);
  CHECK(refusal({3, 3, 10}, 10).find("group 1 ends at 3, not after its start 3") != std::string::npos);
  CHECK(refusal({5, 2, 10}, 10).find("group 1 ends at 2") != std::string::npos);
  CHECK(refusal({3, 8}, 10).find("the last group ends at 8, not at the dataset's size 10") != std::string::npos);
  CHECK(refusal({1, 2, 3, 4}, 3).find("4 groups for 3 samples") != std::string::npos);
}
