// The loader's batch stage (tp/framework/data/batch_stage.h), which data.decode = "gpu" runs on the
// loader threads: the source asked for the encoded form and the encoded field collated ragged;
// a refetch asking the same sample's pixels with the same seed; the rows a stage cannot make
// dropped under data.on_bad_sample = "skip" (counted, named) or failing the epoch under "fail";
// batches identical for any worker count. A stage of the test's own stands in for the device.
#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"
#include "tp/framework/data/batch_stage.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/data/sampler.h"

#include <doctest/doctest.h>

namespace {

using tp::NamedTensors;

/// Samples with "image": encoded, the bytes {index, index} (uint8 [2]) and "image_box" int32 [7]
/// holding the seed's low bits; as pixels, float [3] = {index, seed bits, 1}. "label" = index.
/// Index `bad` fails as pixels (a corrupt file: the CPU path cannot decode it either).
class EncodingSource final : public tp::SampleSource {
 public:
  explicit EncodingSource(uint64_t size, int64_t bad = -1) : size_(size), bad_(bad) {}
  uint64_t size() const override { return size_; }
  bool serial() const override { return false; }
  void set_epoch(uint64_t) override {}
  std::string name() const override { return "test.encoding (train)"; }
  NamedTensors get(uint64_t index, const tp_worker_ctx_t& ctx) const override {
    const auto i = static_cast<int64_t>(index);
    const auto seed_bits = static_cast<int32_t>(ctx.seed & 0x7fffffff);
    NamedTensors sample;
    if (ctx.encoded_images != 0) {
      ++encoded_gets;
      sample.emplace_back("image", at::full({2}, i, at::kByte));
      sample.emplace_back("image_box", at::full({7}, seed_bits, at::kInt));
    } else {
      ++pixel_gets;
      if (i == bad_) throw std::runtime_error("corrupt JPEG data");
      sample.emplace_back("image", at::tensor({static_cast<float>(i), static_cast<float>(seed_bits), 1.0F}));
    }
    sample.emplace_back("label", at::scalar_tensor(i, at::kLong));
    return sample;
  }
  mutable std::atomic<int64_t> encoded_gets{0}, pixel_gets{0};

 private:
  uint64_t size_;
  int64_t bad_;
};

/// Makes "image" float [B, 3] from the encoded batch: {byte, box seed bits, 0} for even labels;
/// odd labels it asks of refetch (the CPU path), as the device stage does for what nvJPEG refuses.
class FakeStage final : public tp::BatchStage {
 public:
  bool wants_encoded() const override { return true; }
  std::vector<std::string> ragged_fields() const override { return {"image"}; }
  std::string summary() const override { return "fake"; }
  NamedTensors run(NamedTensors batch, uint32_t, const Refetch& refetch, std::vector<FailedRow>& failed) const override {
    at::Tensor bytes, offsets, box, label;
    NamedTensors rest;
    for (auto& [name, t] : batch) {
      if (name == "image") bytes = t;
      else if (name == "image_offsets") offsets = t;
      else if (name == "image_box") box = t;
      else rest.emplace_back(name, t);
      if (name == "label") label = t;
    }
    REQUIRE(bytes.defined());
    REQUIRE(offsets.defined());
    REQUIRE(box.dim() == 2);
    const int64_t rows = box.size(0);
    CHECK(offsets.size(0) == rows + 1);  // ragged: the bytes concatenated, with offsets
    at::Tensor image = at::zeros({rows, 3});
    for (int64_t r = 0; r < rows; ++r) {
      if (label[r].item<int64_t>() % 2 == 0) {
        image[r][0] = bytes[offsets[r].item<int64_t>()].item<float>();
        image[r][1] = box[r][0].item<float>();
        continue;
      }
      try {
        for (const auto& [name, t] : refetch(static_cast<size_t>(r)))
          if (name == "image") image[r].copy_(t);
      } catch (const std::exception& e) {
        failed.emplace_back(static_cast<size_t>(r), e.what());
      }
    }
    rest.insert(rest.begin(), {"image", image});
    return rest;
  }
};

std::vector<NamedTensors> epoch_batches(tp::DataLoader& loader, uint64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<NamedTensors> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

}  // namespace

TEST_CASE("a batch stage gets the encoded form, ragged, and its refetch the same sample's pixels and seed") {
  auto source = std::make_shared<EncodingSource>(12);
  const auto options = tp::LoaderOptions().batch_size(4).num_workers(2).seed(7).shuffle(true);
  tp::DataLoader loader(source, options, std::make_shared<FakeStage>());
  const std::vector<NamedTensors> batches = epoch_batches(loader, 1);
  REQUIRE(batches.size() == 3);
  CHECK(source->encoded_gets.load() == 12);
  CHECK(source->pixel_gets.load() == 6);  // the odd labels, refetched
  for (const NamedTensors& batch : batches) {
    REQUIRE(batch.size() == 2);
    CHECK(batch[0].first == "image");
    const at::Tensor& image = batch[0].second;
    const at::Tensor& label = batch[1].second;
    for (int64_t r = 0; r < label.size(0); ++r) {
      const int64_t index = label[r].item<int64_t>();
      const auto seed = static_cast<int64_t>(tp::sample_seed(7, 0, 1, static_cast<uint64_t>(index)) & 0x7fffffff);
      INFO("index " << index);
      // Both paths saw the seed the loader gives this sample: the refetch is the same draw.
      CHECK(image[r][0].item<double>() == static_cast<double>(index));
      CHECK(image[r][1].item<double>() == static_cast<double>(static_cast<float>(seed)));
    }
  }
  // The consumer's batches read with the source's layout: "image" stacked, no offsets left.
  CHECK(tp::batch_size(batches[0], loader.batch_layout()) == 4);
}

TEST_CASE("a stage's failed rows are bad samples: skipped and counted, or the epoch fails naming them") {
  SUBCASE("skip") {
    auto source = std::make_shared<EncodingSource>(8, /*bad=*/5);
    const auto options =
        tp::LoaderOptions().batch_size(4).num_workers(2).shuffle(false).on_bad_sample(tp::BadSamplePolicy::kSkip);
    tp::DataLoader loader(source, options, std::make_shared<FakeStage>());
    const std::vector<NamedTensors> batches = epoch_batches(loader, 0);
    REQUIRE(batches.size() == 2);
    CHECK(batches[0][1].second.size(0) == 4);
    const at::Tensor labels = batches[1][1].second;
    REQUIRE(labels.size(0) == 3);  // 4, 6, 7: the row of 5 left the batch, every field of it
    CHECK(batches[1][0].second.size(0) == 3);
    CHECK(labels[0].item<int64_t>() == 4);
    CHECK(labels[1].item<int64_t>() == 6);
    CHECK(labels[2].item<int64_t>() == 7);
    CHECK(loader.skipped_count() == 1);
    REQUIRE(loader.first_skipped().size() == 1);
    CHECK(loader.first_skipped()[0].index == 5);
    CHECK(loader.first_skipped()[0].message.find("corrupt JPEG data") != std::string::npos);
  }
  SUBCASE("fail") {
    auto source = std::make_shared<EncodingSource>(8, /*bad=*/5);
    // Loaded on the calling thread: batch 0 comes back before batch 1 fails (with workers, a
    // failure found first drops the batches before it, as data_loader.h says).
    tp::DataLoader loader(source, tp::LoaderOptions().batch_size(4).num_workers(0).shuffle(false),
                          std::make_shared<FakeStage>());
    loader.start_epoch(0);
    CHECK(loader.next().has_value());
    try {
      (void)loader.next();
      FAIL("a failed row under on_bad_sample = fail must stop the epoch");
    } catch (const tp::SampleError& e) {
      CHECK(e.index() == 5);
      const std::string what = e.what();
      CHECK(what.find("decoded on the device and again on the CPU: corrupt JPEG data") != std::string::npos);
      CHECK(what.find("data.on_bad_sample = \"skip\"") != std::string::npos);
    }
  }
}

TEST_CASE("batches through a stage are the same for any number of loader threads") {
  auto run = [](int64_t workers) {
    auto source = std::make_shared<EncodingSource>(20);
    tp::DataLoader loader(source, tp::LoaderOptions().batch_size(3).num_workers(workers).seed(3),
                          std::make_shared<FakeStage>());
    return epoch_batches(loader, 2);
  };
  const auto one = run(0), four = run(4);
  REQUIRE(one.size() == four.size());
  for (size_t b = 0; b < one.size(); ++b)
    for (size_t f = 0; f < one[b].size(); ++f) CHECK(at::equal(one[b][f].second, four[b][f].second));
}

TEST_CASE("without a stage the source is asked for pixels") {
  auto source = std::make_shared<EncodingSource>(4);
  tp::DataLoader loader(source, tp::LoaderOptions().batch_size(2).num_workers(1));
  (void)epoch_batches(loader, 0);
  CHECK(source->encoded_gets.load() == 0);
  CHECK(source->pixel_gets.load() == 4);
}
