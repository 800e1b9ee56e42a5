// mnist_idx.so through its C ABI on IDX files written at test time, plain and gzip-compressed:
// shapes, pixel scaling and normalisation, labels, and the errors for mismatched or foreign files.
#include <zlib.h>

#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fixtures.h"

namespace {

using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;

constexpr const char* kMnistIdxId = "org.torchhost.mnist_idx";

std::vector<uint8_t> idx_bytes(uint8_t ndim, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out{0, 0, 0x08, ndim};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(d >> s));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_plain(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                           static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

uint8_t pixel(uint32_t item, uint32_t i) { return static_cast<uint8_t>((item * 37 + i * 11) % 256); }

/// `n` train images of 4x5 (plain files) and 3 val images (gzip only).
std::filesystem::path write_idx(const std::string& name, uint32_t n) {
  const auto dir = tp::test::fresh_fixture_dir(name);
  const auto images = [](uint32_t count) {
    std::vector<uint8_t> d;
    for (uint32_t k = 0; k < count; ++k)
      for (uint32_t i = 0; i < 20; ++i) d.push_back(pixel(k, i));
    return d;
  };
  const auto labels = [](uint32_t count) {
    std::vector<uint8_t> d;
    for (uint32_t k = 0; k < count; ++k) d.push_back(static_cast<uint8_t>(k % 10));
    return d;
  };
  write_plain(dir / "train-images-idx3-ubyte", idx_bytes(3, {n, 4, 5}, images(n)));
  write_plain(dir / "train-labels-idx1-ubyte", idx_bytes(1, {n}, labels(n)));
  write_gz(dir / "t10k-images-idx3-ubyte.gz", idx_bytes(3, {3, 4, 5}, images(3)));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes(1, {3}, labels(3)));
  return dir;
}

void configure_mnist_idx(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& root) {
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["root"] = root.string();
}

}  // namespace

TEST_CASE("mnist_idx: image [1, H, W] scaled to [0, 1] and normalised; labels; .gz files") {
  const auto root = write_idx("mnist_ok", 12);
  PluginLibrary lib("mnist_idx");
  FakeConfig cfg;
  configure_mnist_idx(lib, cfg, root);
  cfg.values["mean"] = 0.1307;
  cfg.values["std"] = 0.3081;
  Dataset train(lib, kMnistIdxId, cfg, "train");
  Dataset val(lib, kMnistIdxId, cfg, "val");
  CHECK(train.size() == 12);
  CHECK(val.size() == 3);
  for (uint64_t k : {0u, 7u, 11u}) {
    const auto s = train.get(k);
    CHECK(s.shape("image") == std::vector<int64_t>{1, 4, 5});
    CHECK(s.values<int64_t>("label")[0] == static_cast<int64_t>(k % 10));
    const auto px = s.values<float>("image");
    for (uint32_t i = 0; i < 20; ++i)
      CHECK(px[i] == doctest::Approx((pixel(static_cast<uint32_t>(k), i) / 255.0 - 0.1307) / 0.3081).epsilon(1e-6));
  }
  const auto v = val.get(2);
  CHECK(v.values<int64_t>("label")[0] == 2);
  CHECK(v.values<float>("image")[3] == doctest::Approx((pixel(2, 3) / 255.0 - 0.1307) / 0.3081).epsilon(1e-6));
}

TEST_CASE("mnist_idx: mismatched counts, foreign files and missing files are named") {
  PluginLibrary lib("mnist_idx");
  void* self = nullptr;
  SUBCASE("labels file with another count") {
    const auto root = write_idx("mnist_count", 12);
    write_plain(root / "train-labels-idx1-ubyte", idx_bytes(1, {5}, std::vector<uint8_t>(5, 1)));
    FakeConfig cfg;
    configure_mnist_idx(lib, cfg, root);
    CHECK(lib.dataset_table(kMnistIdxId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("12 images") != std::string::npos);
  }
  SUBCASE("not an IDX file") {
    const auto root = write_idx("mnist_foreign", 4);
    std::ofstream(root / "train-images-idx3-ubyte") << "PNG....";
    FakeConfig cfg;
    configure_mnist_idx(lib, cfg, root);
    CHECK(lib.dataset_table(kMnistIdxId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("train-images-idx3-ubyte") != std::string::npos);
  }
  SUBCASE("truncated data") {
    const auto root = write_idx("mnist_trunc", 4);
    write_plain(root / "train-images-idx3-ubyte", idx_bytes(3, {4, 4, 5}, std::vector<uint8_t>(30, 0)));
    FakeConfig cfg;
    configure_mnist_idx(lib, cfg, root);
    CHECK(lib.dataset_table(kMnistIdxId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("truncated") != std::string::npos);
  }
  SUBCASE("missing file") {
    FakeConfig cfg;
    configure_mnist_idx(lib, cfg, tp::test::fresh_fixture_dir("mnist_missing"));
    CHECK(lib.dataset_table(kMnistIdxId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_IO);
    CHECK(lib.host.last_error.find(".gz") != std::string::npos);
  }
  CHECK(self == nullptr);
}
