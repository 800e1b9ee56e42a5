// c_dataset.so (plain C11, plugins/template/tier_s_c_dataset) through its C ABI: Tier S needs neither
// C++ nor LibTorch, and a C plugin meets the same contract as a C++ one.
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "support/tier_s_harness.h"

namespace {

using tp::test::Dataset;
using tp::test::DeleterSpy;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

constexpr const char* kCDatasetId = "org.torchhost.test.c_regression";
// The fixture's ground truth (c_dataset.c): y = w . x + b.
constexpr float kWeight[4] = {0.5f, -1.25f, 2.0f, 0.75f};
constexpr float kBias = 0.1f;

void configure_c_dataset(const PluginLibrary& lib, FakeConfig& cfg) {
  tp::test::apply_schema_defaults(*lib.entry().descriptor_at(0), cfg);
}

}  // namespace

TEST_CASE("c_dataset: entry and descriptor of a plain C plugin") {
  PluginLibrary lib("c_dataset");
  const tp_plugin_entry_t& e = lib.entry();
  CHECK(e.struct_size == sizeof(tp_plugin_entry_t));
  CHECK(std::string(e.name) == "c_dataset");
  CHECK(e.build->torch_version == nullptr);
  CHECK(e.build->device_build == TP_BUILD_NOT_TORCH);
  REQUIRE(e.descriptor_count() == 1);
  const tp_descriptor_t& d = *e.descriptor_at(0);
  CHECK(std::string(d.id) == kCDatasetId);
  CHECK(d.kind == TP_KIND_DATASET);
  CHECK(d.tier == TP_TIER_S);
  REQUIRE(d.key_count == 3);
  CHECK(std::string(d.keys[0].name) == "size");
  CHECK(std::string(d.keys[0].default_value) == "256");
  CHECK(std::string(d.keys[1].name) == "fail_first");
  CHECK(std::string(d.keys[2].name) == "fail_count");
  CHECK(std::string(d.keys[2].default_value) == "0"); // no sample fails unless asked
  CHECK(e.descriptor_at(1) == nullptr);
  CHECK(e.get_interface(kCDatasetId, "tp.callback/1") == nullptr);
}

TEST_CASE("c_dataset: depends on neither libstdc++ nor LibTorch") {
  PluginLibrary lib("c_dataset");
  const std::vector<std::string> needed = lib.needed_libraries();
  CHECK(!needed.empty());
  for (const std::string& name : needed) {
    INFO(name);
    CHECK(name.find("stdc++") == std::string::npos);
    CHECK(name.find("torch") == std::string::npos);
    CHECK(name.find("c10") == std::string::npos);
  }
}

TEST_CASE("c_dataset: samples are x [4], y [1] with y = w.x + b, deterministic per split") {
  PluginLibrary lib("c_dataset");
  FakeConfig cfg;
  configure_c_dataset(lib, cfg);
  Dataset train(lib, kCDatasetId, cfg, "train");
  Dataset val(lib, kCDatasetId, cfg, "val");
  CHECK(train.size() == 256);
  double x_sum = 0;
  for (uint64_t i = 0; i < 256; ++i) {
    CAPTURE(i);
    const Sample s = train.get(i);
    REQUIRE(s.fields().size() == 2);
    CHECK(std::string(s.fields()[0].name) == "x");
    CHECK(std::string(s.fields()[1].name) == "y");
    for (const char* f : {"x", "y"}) {
      const DLTensor& t = s.tensor(f);
      CHECK(t.device.device_type == kDLCPU);
      CHECK((t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1));
    }
    CHECK(s.shape("x") == std::vector<int64_t>{4});
    CHECK(s.shape("y") == std::vector<int64_t>{1});
    const auto x = s.values<float>("x");
    float y = kBias;
    for (size_t j = 0; j < 4; ++j) {
      CHECK((x[j] >= -1.0f && x[j] < 1.0f));
      y += kWeight[j] * x[j];
      x_sum += x[j];
    }
    CHECK(s.values<float>("y")[0] == doctest::Approx(y).epsilon(1e-6));
    CHECK(train.get(i, /*seed=*/77, /*worker=*/2).bytes() == s.bytes());
    CHECK(val.get(i).bytes() != s.bytes());
  }
  CHECK(std::abs(x_sum / 1024.0) < 0.1); // inputs spread over [-1, 1)

  cfg.values["size"] = int64_t{1000};
  CHECK(Dataset(lib, kCDatasetId, cfg, "train").size() == 1000);
}

TEST_CASE("c_dataset: errors, NULL destroy, deleters and threads") {
  PluginLibrary lib("c_dataset");
  FakeConfig cfg;
  configure_c_dataset(lib, cfg);
  const tp_dataset_v1_t& t = lib.dataset_table(kCDatasetId);
  t.destroy(nullptr);

  cfg.values["size"] = int64_t{0};
  void* self = nullptr;
  CHECK(t.create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(self == nullptr);
  cfg.values["size"] = int64_t{64};

  const size_t calls_before = DeleterSpy::calls();
  {
    Dataset ds(lib, kCDatasetId, cfg, "train");
    Sample s;
    CHECK(ds.try_get(64, nullptr, s) == TP_ERR_OUT_OF_RANGE);
    CHECK(lib.host.last_error.find("out of range") != std::string::npos);
    CHECK(ds.try_get(0, nullptr, s, /*capacity=*/1) == TP_ERR_INVALID_ARGUMENT);
    CHECK(s.fields().empty());

    std::vector<std::vector<uint8_t>> serial(64), parallel(64);
    for (uint64_t i = 0; i < 64; ++i) serial[i] = ds.get(i).bytes();
    std::vector<Sample> kept;
    kept.push_back(ds.get(5));
    std::vector<std::thread> workers;
    for (uint32_t w = 0; w < 4; ++w)
      workers.emplace_back([&, w] {
        for (uint64_t i = w; i < 64; i += 4) parallel[i] = ds.get(i, 0, w).bytes();
      });
    for (std::thread& th : workers) th.join();
    CHECK(parallel == serial);
    ds.destroy(); // the kept sample's deleter must not need the instance
    CHECK(kept[0].bytes() == serial[5]);
  }
  CHECK(DeleterSpy::calls() - calls_before == 2 * (64 + 64 + 1));
  CHECK(DeleterSpy::pending() == 0);
}
