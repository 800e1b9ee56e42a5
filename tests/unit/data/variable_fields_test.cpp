// Variable-size fields (plugin ABI 1.6): collate() pads and concatenates the fields a dataset
// declares, batch_size() and batch_rows() read such batches back, and the loader applies its
// source's layout. Expected batches are written out by hand from the samples.
// LibTorch headers come before doctest (a glog CHECK would replace doctest's).
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/data/collate.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

using tp::Batching;
using tp::BatchLayout;
using tp::NamedTensors;

namespace {

const at::Tensor& field(const NamedTensors& batch, std::string_view name) {
  for (const auto& [n, t] : batch)
    if (n == name) return t;
  FAIL("no field " << name);
  throw std::logic_error("unreachable");
}

std::vector<std::string> names(const NamedTensors& batch) {
  std::vector<std::string> out;
  for (const auto& [n, t] : batch) out.push_back(n);
  return out;
}

at::Tensor longs(std::vector<int64_t> v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kLong).reshape(shape);
}

// Sample i: "seq" int64 [i + 1] = {10 i, 10 i + 1, ...} (pad with -1), "boxes" float [i, 2] =
// rows {i, j} (ragged; sample 0 has none), "label" int64 scalar = i.
NamedTensors sample(int64_t i) {
  at::Tensor boxes = at::zeros({i, 2}, at::kFloat);
  for (int64_t j = 0; j < i; ++j) {
    boxes[j][0] = static_cast<float>(i);
    boxes[j][1] = static_cast<float>(j);
  }
  return {{"seq", at::arange(i + 1, at::kLong) + 10 * i}, {"boxes", boxes}, {"label", at::scalar_tensor(i, at::kLong)}};
}

const BatchLayout kLayout({{"seq", Batching::kPad, -1.0}, {"boxes", Batching::kRagged, 0.0}});

NamedTensors collate_samples(std::vector<int64_t> indices, const BatchLayout& layout = kLayout) {
  std::vector<NamedTensors> samples;
  for (int64_t i : indices) samples.push_back(sample(i));
  tp::CollateOptions options;
  options.layout = &layout;
  return tp::collate(std::move(samples), options);
}

std::string collate_error(std::vector<NamedTensors> samples, const BatchLayout& layout) {
  tp::CollateOptions options;
  options.layout = &layout;
  try {
    tp::collate(std::move(samples), options);
  } catch (const tp::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("collate: a pad field is padded to the longest sample with its value, plus its lengths") {
  const NamedTensors batch = collate_samples({2, 0, 1});
  const std::vector<std::string> expected{"seq", "seq_lengths", "boxes", "boxes_offsets", "label"};
  CHECK((names(batch) == expected));
  CHECK(at::equal(field(batch, "seq"), longs({20, 21, 22, 0, -1, -1, 10, 11, -1}, {3, 3})));
  CHECK(at::equal(field(batch, "seq_lengths"), longs({3, 1, 2}, {3, 1})));
  CHECK((field(batch, "seq").scalar_type() == at::kLong));
}

TEST_CASE("collate: a ragged field is concatenated along dim 0, with offsets [B + 1]; an empty sample is allowed") {
  const NamedTensors batch = collate_samples({2, 0, 1});
  const at::Tensor expected = at::tensor(std::vector<float>{2, 0, 2, 1, 1, 0}, at::kFloat).reshape({3, 2});
  CHECK(at::equal(field(batch, "boxes"), expected));
  CHECK(at::equal(field(batch, "boxes_offsets"), longs({0, 2, 2, 3}, {4})));
  CHECK(at::equal(field(batch, "label"), longs({2, 0, 1}, {3})));
}

TEST_CASE("collate: a padded image keeps every sample in its top-left corner") {
  std::vector<NamedTensors> samples;
  samples.push_back({{"image", at::ones({3, 2, 4})}});
  samples.push_back({{"image", at::full({3, 5, 1}, 2.0)}});
  const BatchLayout layout({{"image", Batching::kPad, 0.0}});
  tp::CollateOptions options;
  options.layout = &layout;
  const NamedTensors batch = tp::collate(std::move(samples), options);
  const at::Tensor& image = field(batch, "image");
  REQUIRE((image.sizes() == at::IntArrayRef{2, 3, 5, 4}));
  CHECK(image[0].narrow(1, 0, 2).eq(1).all().item<bool>());
  CHECK(image[0].narrow(1, 2, 3).eq(0).all().item<bool>());
  CHECK(image[1].narrow(2, 0, 1).eq(2).all().item<bool>());
  CHECK(image[1].narrow(2, 1, 3).eq(0).all().item<bool>());
  CHECK(at::equal(field(batch, "image_lengths"), longs({3, 2, 4, 3, 5, 1}, {2, 3})));
}

TEST_CASE("collate: without a layout, a variable-size field is refused with the hint to declare it") {
  std::vector<NamedTensors> samples{sample(1), sample(2)};
  const std::string message = collate_error(std::move(samples), BatchLayout{});
  CHECK(message.find("field 'seq' of sample 1 has shape [3] but sample 0 has [2]") != std::string::npos);
  CHECK(message.find("field_batching") != std::string::npos);
}

TEST_CASE("collate: what a variable-size field must still keep") {
  SUBCASE("a pad field keeps its number of dims") {
    std::vector<NamedTensors> s;
    s.push_back({{"seq", at::zeros({2})}});
    s.push_back({{"seq", at::zeros({2, 2})}});
    const std::string m = collate_error(std::move(s), BatchLayout({{"seq", Batching::kPad, 0.0}}));
    CHECK(m.find("pad field 'seq' of sample 1 has shape [2, 2] but sample 0 has [2]") != std::string::npos);
    CHECK(m.find("keeps its number of dims") != std::string::npos);
  }
  SUBCASE("a ragged field varies in dim 0 only") {
    std::vector<NamedTensors> s;
    s.push_back({{"boxes", at::zeros({1, 4})}});
    s.push_back({{"boxes", at::zeros({2, 5})}});
    const std::string m = collate_error(std::move(s), BatchLayout({{"boxes", Batching::kRagged, 0.0}}));
    CHECK(m.find("ragged field 'boxes' of sample 1 has shape [2, 5] but sample 0 has [1, 4]") != std::string::npos);
  }
  SUBCASE("dtypes still agree") {
    std::vector<NamedTensors> s;
    s.push_back({{"seq", at::zeros({2}, at::kFloat)}});
    s.push_back({{"seq", at::zeros({3}, at::kLong)}});
    const std::string m = collate_error(std::move(s), BatchLayout({{"seq", Batching::kPad, 0.0}}));
    CHECK(m.find("has dtype Long but sample 0 has Float") != std::string::npos);
  }
  SUBCASE("a declared field the samples lack") {
    std::vector<NamedTensors> s{{{"x", at::zeros({2})}}};
    const std::string m = collate_error(std::move(s), BatchLayout({{"mask", Batching::kPad, 255.0}}));
    CHECK(m.find("declares field 'mask' pad (field_batching), but sample 0 has no such field") != std::string::npos);
  }
  SUBCASE("a sample field named like one collate adds") {
    std::vector<NamedTensors> s{{{"seq", at::zeros({2})}, {"seq_lengths", at::zeros({1})}}};
    const std::string m = collate_error(std::move(s), BatchLayout({{"seq", Batching::kPad, 0.0}}));
    CHECK(m.find("has a field 'seq_lengths', the name the loader gives to the pad field 'seq''s lengths") !=
          std::string::npos);
  }
  SUBCASE("a scalar cannot vary") {
    std::vector<NamedTensors> s{{{"label", at::scalar_tensor(1, at::kLong)}}};
    const std::string m = collate_error(std::move(s), BatchLayout({{"label", Batching::kRagged, 0.0}}));
    CHECK(m.find("is declared ragged but is a scalar") != std::string::npos);
  }
  SUBCASE("an integer field's pad value is an integer") {
    std::vector<NamedTensors> s{{{"mask", at::zeros({2, 2}, at::kLong)}}};
    const std::string m = collate_error(std::move(s), BatchLayout({{"mask", Batching::kPad, 0.5}}));
    CHECK(m.find("pad field 'mask' is Long but its pad value 0.5 is not an integer") != std::string::npos);
  }
}

TEST_CASE("BatchLayout: refuses a name declared twice or taken by an added field") {
  const auto error = [](std::vector<tp::FieldBatching> fields) -> std::string {
    try {
      BatchLayout layout(std::move(fields));
    } catch (const tp::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(error({{"a", Batching::kPad, 0.0}, {"a", Batching::kRagged, 0.0}}).find("field 'a' is declared twice") !=
        std::string::npos);
  CHECK(error({{"a", Batching::kRagged, 0.0}, {"a_offsets", Batching::kPad, 0.0}})
            .find("'a_offsets' is declared, but the loader adds a field of that name") != std::string::npos);
  CHECK(BatchLayout({{"image", Batching::kPad, 0.0}, {"boxes", Batching::kRagged, 0.0}}).describe() ==
        "image: pad 0, boxes: ragged");
}

TEST_CASE("batch_size: counts samples, not a ragged field's rows or its offsets") {
  const NamedTensors batch = collate_samples({3, 1, 2, 0});
  CHECK(tp::batch_size(batch, kLayout) == 4);
  // Only ragged fields: the offsets give the count.
  const BatchLayout only_boxes({{"boxes", Batching::kRagged, 0.0}});
  std::vector<NamedTensors> samples;
  for (int64_t i : {3, 1, 2}) samples.push_back({{"boxes", sample(i)[1].second}});
  tp::CollateOptions options;
  options.layout = &only_boxes;
  const NamedTensors boxes_only = tp::collate(std::move(samples), options);
  CHECK(field(boxes_only, "boxes").size(0) == 6);
  CHECK(tp::batch_size(boxes_only, only_boxes) == 3);
  CHECK(tp::batch_size(NamedTensors{}, kLayout) == 0);
}

TEST_CASE("batch_rows: a piece of a variable-size batch equals the batch of that piece's samples") {
  // Rows 1..2 of the batch of samples {3, 1, 2, 0} hold samples 1 and 2: the same ragged rows and
  // rebased offsets as collating {1, 2} alone; the pad field keeps the whole batch's width.
  const NamedTensors batch = collate_samples({3, 1, 2, 0});
  const NamedTensors piece = tp::batch_rows(batch, 1, 2, kLayout);
  const NamedTensors alone = collate_samples({1, 2});
  CHECK((names(piece) == names(alone)));
  CHECK(at::equal(field(piece, "boxes"), field(alone, "boxes")));
  CHECK(at::equal(field(piece, "boxes_offsets"), field(alone, "boxes_offsets")));
  CHECK(at::equal(field(piece, "label"), field(alone, "label")));
  CHECK(at::equal(field(piece, "seq_lengths"), field(alone, "seq_lengths")));
  CHECK((field(piece, "seq").sizes() == at::IntArrayRef{2, 4}));
  CHECK(at::equal(field(piece, "seq").narrow(1, 0, 3), field(alone, "seq")));
  CHECK(tp::batch_size(piece, kLayout) == 2);
  // The last row: sample 0 has no boxes.
  const NamedTensors last = tp::batch_rows(batch, 3, 1, kLayout);
  CHECK(field(last, "boxes").size(0) == 0);
  CHECK(at::equal(field(last, "boxes_offsets"), longs({0, 0}, {2})));
}

namespace {

// A SampleSource of sample(i) with kLayout, for the loader.
class VariableSource : public tp::SampleSource {
 public:
  uint64_t size() const override { return 7; }
  NamedTensors get(uint64_t index, const tp_worker_ctx_t&) const override {
    return sample(static_cast<int64_t>(index));
  }
  bool serial() const override { return false; }
  void set_epoch(uint64_t) override {}
  std::string name() const override { return "test.variable (train)"; }
  const BatchLayout& batch_layout() const override { return kLayout; }
};

}  // namespace

TEST_CASE("DataLoader: batches of a source with variable-size fields, with workers and ranks") {
  // Two ranks, 7 samples, evaluation sharding: every sample exactly once, each batch collated with
  // the source's layout.
  int64_t seen = 0;
  int64_t boxes = 0;
  for (int rank = 0; rank < 2; ++rank) {
    tp::DataLoader loader(std::make_shared<VariableSource>(), tp::LoaderOptions()
                                                                  .batch_size(2)
                                                                  .num_workers(2)
                                                                  .rank(rank)
                                                                  .world_size(2)
                                                                  .mode(tp::LoaderMode::kEvalExact));
    CHECK(loader.batch_layout().ragged("boxes"));
    loader.start_epoch(0);
    while (auto batch = loader.next()) {
      const int64_t rows = tp::batch_size(*batch, loader.batch_layout());
      seen += rows;
      const at::Tensor& offsets = field(*batch, "boxes_offsets");
      CHECK(offsets.size(0) == rows + 1);
      CHECK(field(*batch, "boxes").size(0) == offsets[rows].item<int64_t>());
      // Each sample's boxes are the rows its label says: sample i has i boxes.
      CHECK(at::equal(offsets.narrow(0, 1, rows) - offsets.narrow(0, 0, rows), field(*batch, "label")));
      boxes += field(*batch, "boxes").size(0);
    }
  }
  CHECK(seen == 7);
  CHECK(boxes == 0 + 1 + 2 + 3 + 4 + 5 + 6);
}
