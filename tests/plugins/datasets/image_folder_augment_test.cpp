// image_folder.so's augmentation through its C ABI (rand_augment, trivial_augment, random_erasing):
// reproducible from the host seed on any worker, the val split untouched, no-op settings change
// nothing, erasing boxes and values, and key validation. Op-by-op exactness against torchvision
// is tests/plugins/datasets/augment_oracle.
#include <cmath>
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

namespace {

/// Every key at its default plus `root`, val_split 0.34 and the given augmentation keys.
void configure_augmented(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& root) {
  configure(lib, cfg, root);
  cfg.values["val_split"] = 0.34;
  cfg.values["resize"] = std::vector<int64_t>{20};
  cfg.values["center_crop"] = std::vector<int64_t>{20};
  cfg.values["random_resized_crop"] = std::vector<int64_t>{20};
  cfg.values["hflip"] = 0.5;
}

/// create() of the train split fails with TP_ERR_CONFIG and a message naming `key`.
void check_config_error(PluginLibrary& lib, FakeConfig& cfg, const std::string& key) {
  void* self = nullptr;
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(self == nullptr);
  INFO("message: " << lib.host.last_error);
  CHECK(lib.host.last_error.find(key) != std::string::npos);
}

}  // namespace

TEST_CASE("image_folder: rand_augment, trivial_augment and random_erasing depend only on the seed; val has none") {
  const Fixture f = write_folder("if_augment", 28, 36);
  PluginLibrary lib("image_folder");
  FakeConfig plain_cfg;
  configure_augmented(lib, plain_cfg, f.root);
  Dataset plain_train(lib, kId, plain_cfg, "train");
  Dataset plain_val(lib, kId, plain_cfg, "val");
  for (const bool trivial : {false, true}) {
    CAPTURE(trivial);
    FakeConfig cfg;
    configure_augmented(lib, cfg, f.root);
    if (trivial) cfg.values["trivial_augment"] = true;
    else cfg.values["rand_augment"] = std::vector<int64_t>{3, 15};
    cfg.values["random_erasing"] = 0.5;
    cfg.values["erasing_value"] = std::string("random");
    Dataset train(lib, kId, cfg, "train");
    Dataset val(lib, kId, cfg, "val");
    std::set<std::vector<uint8_t>> distinct;
    int differs_from_plain = 0;
    for (uint64_t seed = 0; seed < 16; ++seed) {
      const Sample a = train.get(2, seed, /*worker=*/0);
      CHECK(a.bytes() == train.get(2, seed, /*worker=*/5).bytes());  // any worker, same bytes
      CHECK(a.shape("image") == std::vector<int64_t>{3, 20, 20});
      distinct.insert(a.bytes());
      differs_from_plain += a.bytes() != plain_train.get(2, seed).bytes();
    }
    CHECK(distinct.size() == 16);
    // The crop and flip draws are unchanged (own tags), so only the augmentation can differ;
    // a TrivialAugment Identity or a no-op magnitude draw may leave a sample as it was.
    CHECK(differs_from_plain >= 12);
    // Val: the plain resize + center crop, whatever the seed and the augmentation keys.
    for (uint64_t i = 0; i < val.size(); ++i) {
      CHECK(val.get(i, 1).bytes() == val.get(i, 77).bytes());
      CHECK(val.get(i, 1).bytes() == plain_val.get(i, 1).bytes());
    }
  }
}

TEST_CASE("image_folder: rand_augment = [0, M] and random_erasing = 0 change nothing") {
  const Fixture f = write_folder("if_augment_noop", 16, 16);
  PluginLibrary lib("image_folder");
  FakeConfig plain_cfg;
  configure_augmented(lib, plain_cfg, f.root);
  FakeConfig cfg;
  configure_augmented(lib, cfg, f.root);
  cfg.values["rand_augment"] = std::vector<int64_t>{0, 30};
  Dataset plain(lib, kId, plain_cfg, "train");
  Dataset aug(lib, kId, cfg, "train");
  for (uint64_t seed = 0; seed < 4; ++seed) CHECK(aug.get(1, seed).bytes() == plain.get(1, seed).bytes());
}

TEST_CASE("image_folder: random_erasing = 1 with zero value zeroes one box after normalisation") {
  const Fixture f = write_folder("if_erase", 30, 40);
  PluginLibrary lib("image_folder");
  FakeConfig plain_cfg;
  configure(lib, plain_cfg, f.root);
  plain_cfg.values["mean"] = std::vector<double>{-1.0, -1.0, -1.0};  // every normalised value >= 1
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["mean"] = std::vector<double>{-1.0, -1.0, -1.0};
  cfg.values["random_erasing"] = 1.0;
  cfg.values["erasing_scale"] = std::vector<double>{0.1, 0.2};
  cfg.values["erasing_ratio"] = std::vector<double>{0.5, 2.0};
  Dataset plain(lib, kId, plain_cfg, "train");
  Dataset erased(lib, kId, cfg, "train");
  for (uint64_t seed = 0; seed < 8; ++seed) {
    int h = 0, w = 0;
    const std::vector<float> a = chw(plain.get(0, seed), &h, &w);
    const std::vector<float> b = chw(erased.get(0, seed), &h, &w);
    int y0 = h, y1 = -1, x0 = w, x1 = -1, zeros = 0;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const bool zero = b[y * w + x] == 0.f;
        for (int c = 1; c < 3; ++c) CHECK((b[(c * h + y) * w + x] == 0.f) == zero);  // same box in R, G, B
        if (!zero) {
          for (int c = 0; c < 3; ++c) CHECK(b[(c * h + y) * w + x] == a[(c * h + y) * w + x]);
          continue;
        }
        ++zeros;
        y0 = std::min(y0, y), y1 = std::max(y1, y), x0 = std::min(x0, x), x1 = std::max(x1, x);
      }
    // One solid rectangle whose area and aspect follow erasing_scale and erasing_ratio (up to
    // the rounding of h and w to whole pixels).
    const int bh = y1 - y0 + 1, bw = x1 - x0 + 1;
    CAPTURE(seed);
    CHECK(zeros == bh * bw);
    CHECK(bh * bw >= 0.1 * h * w * 0.8);
    CHECK(bh * bw <= 0.2 * h * w * 1.2);
    CHECK(static_cast<double>(bh) / bw >= 0.5 * 0.7);
    CHECK(static_cast<double>(bh) / bw <= 2.0 * 1.4);
  }
}

TEST_CASE("image_folder: augmentation keys are validated, naming the key") {
  const Fixture f = write_folder("if_augment_errors", 8, 8);
  PluginLibrary lib("image_folder");
  auto with = [&](const std::string& key, FakeConfig::Value value) {
    auto cfg = std::make_unique<FakeConfig>();
    configure(lib, *cfg, f.root);
    cfg->values[key] = std::move(value);
    return cfg;
  };
  SUBCASE("rand_augment N outside [0, 14]") { check_config_error(lib, *with("rand_augment", std::vector<int64_t>{15, 9}), "rand_augment N"); }
  SUBCASE("rand_augment M outside [0, 30]") { check_config_error(lib, *with("rand_augment", std::vector<int64_t>{2, 31}), "rand_augment M"); }
  SUBCASE("rand_augment needs [N, M]") { check_config_error(lib, *with("rand_augment", std::vector<int64_t>{2}), "rand_augment"); }
  SUBCASE("rand_augment and trivial_augment together") {
    auto cfg = with("rand_augment", std::vector<int64_t>{2, 9});
    cfg->values["trivial_augment"] = true;
    check_config_error(lib, *cfg, "trivial_augment");
  }
  SUBCASE("random_erasing outside [0, 1]") { check_config_error(lib, *with("random_erasing", 1.5), "random_erasing"); }
  SUBCASE("erasing_scale unordered") { check_config_error(lib, *with("erasing_scale", std::vector<double>{0.4, 0.1}), "erasing_scale"); }
  SUBCASE("erasing_scale above 1") { check_config_error(lib, *with("erasing_scale", std::vector<double>{0.4, 1.5}), "erasing_scale"); }
  SUBCASE("erasing_ratio unordered") { check_config_error(lib, *with("erasing_ratio", std::vector<double>{3.3, 0.3}), "erasing_ratio"); }
  SUBCASE("erasing_value unknown") { check_config_error(lib, *with("erasing_value", std::string("blue")), "erasing_value"); }
}

TEST_CASE("image_folder: channels_last stores the same erased values (random) in HWC memory") {
  const Fixture f = write_folder("if_erase_cl", 24, 24);
  PluginLibrary lib("image_folder");
  FakeConfig a_cfg;
  configure(lib, a_cfg, f.root);
  a_cfg.values["rand_augment"] = std::vector<int64_t>{2, 9};
  a_cfg.values["random_erasing"] = 1.0;
  a_cfg.values["erasing_value"] = std::string("random");
  FakeConfig b_cfg;
  configure(lib, b_cfg, f.root);
  b_cfg.values["rand_augment"] = std::vector<int64_t>{2, 9};
  b_cfg.values["random_erasing"] = 1.0;
  b_cfg.values["erasing_value"] = std::string("random");
  b_cfg.values["channels_last"] = true;
  Dataset a(lib, kId, a_cfg, "train");
  Dataset b(lib, kId, b_cfg, "train");
  for (uint64_t seed = 0; seed < 4; ++seed) {
    int h = 0, w = 0;
    const std::vector<float> x = chw(a.get(5, seed), &h, &w);
    CHECK(max_abs_diff(x, chw(b.get(5, seed), &h, &w)) == 0.0f);
    // Some values lie outside [0, 1]: the normal draws of the erased box.
    CHECK(std::any_of(x.begin(), x.end(), [](float v) { return v < 0.f || v > 1.f; }));
  }
}
