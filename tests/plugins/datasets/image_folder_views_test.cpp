// image_folder.so's multiple views of one image (views, local_views: SimCLR/BYOL's two views,
// DINO's multi-crop) through its C ABI: the fields and their sizes, each view equal to the
// single-view pixels of its own seed (so every view is the documented transform, independent of
// the others), the val split untouched, the encoded form refused, and the keys' validation.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "image_folder_support.h"
#include "tp/cpp/random.h"

using namespace tp::test::image_folder;

namespace {

/// Every key at its default plus `root`, val_split 0.34, a 20 px random resized crop and flips.
void configure_views(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& root) {
  configure(lib, cfg, root);
  cfg.values["val_split"] = 0.34;
  cfg.values["resize"] = std::vector<int64_t>{20};
  cfg.values["center_crop"] = std::vector<int64_t>{20};
  cfg.values["random_resized_crop"] = std::vector<int64_t>{20};
  cfg.values["hflip"] = 0.5;
  cfg.values["brightness"] = 0.4;
}

/// The bytes of field `name` (a compact float32 image).
std::vector<uint8_t> field_bytes(const Sample& s, const char* name) {
  const DLTensor& t = s.tensor(name);
  REQUIRE(t.dtype.code == kDLFloat);
  int64_t n = 4;
  for (int32_t d = 0; d < t.ndim; ++d) n *= t.shape[d];
  const auto* p = static_cast<const uint8_t*>(t.data) + t.byte_offset;
  return {p, p + n};
}

/// The documented seed of view `index` (image_field.h view_seed), written out here so that a
/// change of the derivation, which would change every multi-view run's samples, fails this test.
uint64_t documented_view_seed(uint64_t seed, uint64_t index) {
  tp::cpp::SplitMix64 gen(seed ^ ((0x100U + index) * 0xD1B54A32D192ED03ULL));
  return gen.next();
}

bool has_field(const Sample& s, const std::string& name) {
  for (const tp_field_t& f : s.fields())
    if (name == f.name) return true;
  return false;
}

}  // namespace

TEST_CASE("image_folder: views and local_views give each image independent views, each the single-view pixels of "
          "its own seed") {
  const Fixture f = write_folder("if_views", 28, 36);
  PluginLibrary lib("image_folder");
  FakeConfig views_cfg;
  configure_views(lib, views_cfg, f.root);
  views_cfg.values["views"] = int64_t{2};
  views_cfg.values["local_views"] = int64_t{3};
  views_cfg.values["local_crop"] = std::vector<int64_t>{8};
  views_cfg.values["local_scale"] = std::vector<double>{0.1, 0.5};
  FakeConfig single_cfg;  // the global views' transform, one view
  configure_views(lib, single_cfg, f.root);
  FakeConfig local_cfg;  // the local views' transform, one view
  configure_views(lib, local_cfg, f.root);
  local_cfg.values["random_resized_crop"] = std::vector<int64_t>{8};
  local_cfg.values["scale"] = std::vector<double>{0.1, 0.5};
  Dataset train(lib, kId, views_cfg, "train");
  Dataset single(lib, kId, single_cfg, "train");
  Dataset local(lib, kId, local_cfg, "train");

  int views_differ = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    CAPTURE(seed);
    const Sample s = train.get(1, seed, /*worker=*/0);
    CHECK(s.bytes() == train.get(1, seed, /*worker=*/3).bytes());  // any worker, same bytes
    CHECK_FALSE(has_field(s, "image"));
    CHECK_FALSE(has_field(s, "image_2"));
    CHECK_FALSE(has_field(s, "local_3"));
    CHECK(s.shape("label") == std::vector<int64_t>{});
    for (uint64_t k = 0; k < 2; ++k) {
      const std::string name = "image_" + std::to_string(k);
      CHECK(s.shape(name.c_str()) == std::vector<int64_t>{3, 20, 20});
      CHECK(field_bytes(s, name.c_str()) == field_bytes(single.get(1, documented_view_seed(seed, k)), "image"));
    }
    for (uint64_t k = 0; k < 3; ++k) {
      const std::string name = "local_" + std::to_string(k);
      CHECK(s.shape(name.c_str()) == std::vector<int64_t>{3, 8, 8});
      CHECK(field_bytes(s, name.c_str()) == field_bytes(local.get(1, documented_view_seed(seed, 16 + k)), "image"));
    }
    views_differ += field_bytes(s, "image_0") != field_bytes(s, "image_1");
  }
  CHECK(views_differ == 12);  // brightness alone makes two independent draws differ

  // Val keeps one "image", the plain resize + center crop, whatever views says.
  Dataset val(lib, kId, views_cfg, "val");
  Dataset plain_val(lib, kId, single_cfg, "val");
  REQUIRE(val.size() > 0);
  for (uint64_t i = 0; i < val.size(); ++i) CHECK(val.get(i, 5).bytes() == plain_val.get(i, 5).bytes());

  // views = 1 and local_views = 0 (the defaults) are the single-view dataset, bit for bit.
  FakeConfig one_cfg;
  configure_views(lib, one_cfg, f.root);
  one_cfg.values["views"] = int64_t{1};
  Dataset one(lib, kId, one_cfg, "train");
  CHECK(one.get(2, 9).bytes() == single.get(2, 9).bytes());
}

TEST_CASE("image_folder: views cannot be decoded by the host, and their keys are validated naming the key") {
  const Fixture f = write_folder("if_views_keys", 28, 36);
  PluginLibrary lib("image_folder");
  {
    FakeConfig cfg;
    configure_views(lib, cfg, f.root);
    cfg.values["brightness"] = 0.0;  // else brightness alone would keep the encoded form off
    cfg.values["views"] = int64_t{2};
    Dataset train(lib, kId, cfg, "train");
    REQUIRE((train.table().encoded_images != nullptr));
    const tp_encoded_image_t* images = nullptr;
    uint32_t count = 0;
    REQUIRE(train.table().encoded_images(train.self(), &images, &count) == TP_OK);
    REQUIRE(count == 1);
    CHECK(std::string(images[0].name) == "image_0");  // a field the sample has (host plugins check reads it)
    CHECK(images[0].available == 0);
    REQUIRE(images[0].reason != nullptr);
    CHECK(std::string(images[0].reason).find("views = 2") != std::string::npos);
  }
  const auto refused = [&](const char* key, auto value, const char* expected) {
    FakeConfig cfg;
    configure_views(lib, cfg, f.root);
    cfg.values[key] = value;
    if (std::string(key) == "local_crop") cfg.values["local_views"] = int64_t{2};
    void* self = nullptr;
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK(self == nullptr);
    INFO("message: " << lib.host.last_error);
    CHECK(lib.host.last_error.find(expected) != std::string::npos);
  };
  refused("views", int64_t{17}, "views");
  refused("views", int64_t{0}, "views");
  refused("local_views", int64_t{17}, "local_views");
  refused("local_crop", std::vector<int64_t>{0}, "local_crop");
  refused("local_scale", std::vector<double>{0.5, 1.5}, "local_scale");
  // Local views without a random resized crop on the global views.
  FakeConfig cfg;
  configure_views(lib, cfg, f.root);
  cfg.values["random_resized_crop"] = std::vector<int64_t>{};
  cfg.values["local_views"] = int64_t{2};
  void* self = nullptr;
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("local_views needs random_resized_crop") != std::string::npos);
}
