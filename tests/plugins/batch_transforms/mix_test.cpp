// mix.so through the C ABI ("tp.batch_transform/1"): the blend is the documented one for the
// parameters draw_mix_params gives the seed, equal for equal seeds and different for others;
// labels become probabilities that sum to 1; bad options fail create naming the key.
#include "support/plugin_harness.h"

#include <cmath>

#include "tp/iface/batch_transform.h"
#include "mix_params.h"

namespace {

using namespace tp::test;
constexpr int64_t kClasses = 5;

/// A transform with the descriptor's defaults plus `overrides` (num_classes = 5 unless given).
struct Transform {
  LoadedPlugin& p = plugin("mix");
  const tp_batch_transform_v1_t* t = nullptr;
  void* self = nullptr;
  tp_status created = TP_OK;

  explicit Transform(const char* id, std::map<std::string, FakeConfig::Value> overrides = {}) {
    t = &p.table<tp_batch_transform_v1_t>(id, TP_IFACE_BATCH_TRANSFORM_V1);
    FakeConfig cfg;
    // num_classes is required (no default): the defaults of the other keys, as the host fills them.
    tp_descriptor_t with_defaults = p.descriptor(id);
    std::vector<tp_config_key_t> keys(with_defaults.keys, with_defaults.keys + with_defaults.key_count);
    std::erase_if(keys, [](const tp_config_key_t& k) { return k.default_value == nullptr; });
    with_defaults.keys = keys.data();
    with_defaults.key_count = static_cast<uint32_t>(keys.size());
    fill_defaults(cfg, with_defaults);
    cfg.values["num_classes"] = kClasses;
    for (auto& [k, v] : overrides) cfg.values[k] = v;
    created = t->create(&p.host.host, &cfg.view, &self);
  }
  ~Transform() { t->destroy(self); }

  /// The fields apply returned, by name (new references adopted).
  std::map<std::string, at::Tensor> apply(uint64_t seed, Fields& batch) {
    REQUIRE_MESSAGE(created == TP_OK, p.host.last_error);
    tp_named_tensor_t out[4] = {};
    uint32_t count = 0;
    REQUIRE_MESSAGE(t->apply(self, seed, batch.view(), batch.size(), out, 4, &count) == TP_OK, p.host.last_error);
    std::map<std::string, at::Tensor> result;
    for (uint32_t i = 0; i < count; ++i) result[out[i].name] = adopt(p, out[i].tensor);
    return result;
  }
};

Fields make_batch(int64_t b = 6, int64_t h = 12, int64_t w = 10) {
  at::manual_seed(7);
  return Fields{{"image", at::rand({b, 3, h, w})}, {"label", at::randint(kClasses, {b}, at::kLong)}};
}

at::Tensor one_hot_float(const at::Tensor& labels) { return at::one_hot(labels, kClasses).to(at::kFloat); }

TEST_CASE("mixup: lam x + (1 - lam) roll(x), labels blended the same way; only the seed decides") {
  Transform mixup("org.torchhost.mixup", {{"alpha", 0.4}});
  Fields batch = make_batch();
  const at::Tensor x = batch.items[0].second.clone();
  const at::Tensor y = batch.items[1].second.clone();
  auto out = mixup.apply(123, batch);
  REQUIRE(out.size() == 2);
  const tp::mix::MixParams p = tp::mix::draw_mix_params(123, {0.4, 0.0, 0.5, 1.0}, 12, 10);
  REQUIRE(p.applied);
  CHECK_FALSE(p.cutmix);
  CHECK(p.lam > 0.0);
  CHECK(p.lam < 1.0);
  CHECK(at::equal(out["image"], x.roll(1, 0).mul(1.0 - p.lam).add(x.mul(p.lam))));
  CHECK(at::equal(out["label"], one_hot_float(y).roll(1, 0).mul(1.0 - p.lam).add(one_hot_float(y).mul(p.lam))));
  CHECK((out["label"].scalar_type() == at::kFloat));
  CHECK(at::allclose(out["label"].sum(1), at::ones({6})));
  // The inputs are untouched (the host may still hold them).
  CHECK(at::equal(batch.items[0].second, x));
  CHECK(at::equal(batch.items[1].second, y));
  // Same seed: the same bits; another seed: another lambda.
  auto again = mixup.apply(123, batch);
  CHECK(at::equal(again["image"], out["image"]));
  auto other = mixup.apply(124, batch);
  CHECK_FALSE(at::equal(other["image"], out["image"]));
}

TEST_CASE("cutmix: a box of the partner image, label weight = the area left unchanged") {
  Transform cutmix("org.torchhost.cutmix");
  Fields batch = make_batch(4, 16, 20);
  const at::Tensor x = batch.items[0].second;
  const at::Tensor y = batch.items[1].second;
  int boxes = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto out = cutmix.apply(seed, batch);
    const tp::mix::MixParams p = tp::mix::draw_mix_params(seed, {0.0, 1.0, 0.5, 1.0}, 16, 20);
    REQUIRE(p.cutmix);
    at::Tensor expected = x.clone();
    expected.slice(-2, p.y1, p.y2).slice(-1, p.x1, p.x2).copy_(x.roll(1, 0).slice(-2, p.y1, p.y2).slice(-1, p.x1, p.x2));
    CHECK(at::equal(out["image"], expected));
    const double area = static_cast<double>((p.x2 - p.x1) * (p.y2 - p.y1)) / (16.0 * 20.0);
    CHECK(p.lam == doctest::Approx(1.0 - area));
    CHECK(at::allclose(out["label"], one_hot_float(y).roll(1, 0) * (1.0 - p.lam) + one_hot_float(y) * p.lam));
    CHECK(at::allclose(out["label"].sum(1), at::ones({4})));
    CHECK(p.x1 >= 0);
    CHECK(p.x2 <= 20);
    CHECK(p.y1 >= 0);
    CHECK(p.y2 <= 16);
    if (p.x2 > p.x1 && p.y2 > p.y1) ++boxes;
  }
  CHECK(boxes >= 15);  // lambda ~ Beta(1, 1): an empty box needs lambda within ~1/16 of 1
}

TEST_CASE("mixup_cutmix: switch_prob picks CutMix, prob skips the mix but still gives probabilities") {
  Fields batch = make_batch();
  const at::Tensor x = batch.items[0].second;
  const at::Tensor y = batch.items[1].second;
  SUBCASE("prob = 0: images kept (not returned), labels one-hot") {
    Transform never("org.torchhost.mixup_cutmix", {{"prob", 0.0}});
    auto out = never.apply(5, batch);
    CHECK(out.count("image") == 0);
    CHECK(at::equal(out["label"], one_hot_float(y)));
  }
  SUBCASE("the draws follow the policy: about switch_prob CutMix, about prob mixed") {
    int cutmix = 0, applied = 0;
    const tp::mix::MixPolicy policy{0.8, 1.0, 0.3, 0.6};
    for (uint64_t seed = 0; seed < 4000; ++seed) {
      const tp::mix::MixParams p = tp::mix::draw_mix_params(seed, policy, 12, 10);
      applied += p.applied;
      cutmix += p.applied && p.cutmix;
    }
    CHECK(applied / 4000.0 == doctest::Approx(0.6).epsilon(0.05));
    CHECK(static_cast<double>(cutmix) / applied == doctest::Approx(0.3).epsilon(0.08));
  }
  SUBCASE("through the ABI the policy's choice is what the batch gets") {
    Transform both("org.torchhost.mixup_cutmix", {{"switch_prob", 0.5}});
    int seen_cutmix = 0, seen_mixup = 0;
    for (uint64_t seed = 0; seed < 16; ++seed) {
      auto out = both.apply(seed, batch);
      const tp::mix::MixParams p = tp::mix::draw_mix_params(seed, {0.8, 1.0, 0.5, 1.0}, 12, 10);
      // CutMix keeps pixels of the image itself; Mixup (0 < lam < 1) changes almost every pixel.
      const double kept = out["image"].eq(x).to(at::kDouble).mean().item<double>();
      if (p.cutmix) {
        ++seen_cutmix;
        CHECK(kept >= p.lam - 1e-9);
      } else {
        ++seen_mixup;
        CHECK(kept < 0.5);
      }
    }
    CHECK(seen_cutmix > 0);
    CHECK(seen_mixup > 0);
  }
}

TEST_CASE("lambda ~ Beta(alpha, alpha): mean 1/2, variance 1 / (4 (2 alpha + 1))") {
  for (double alpha : {0.2, 0.8, 2.0}) {
    double sum = 0.0, squares = 0.0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double lam = tp::mix::draw_mix_params(static_cast<uint64_t>(i), {alpha, 0.0, 0.5, 1.0}, 8, 8).lam;
      REQUIRE(lam >= 0.0);
      REQUIRE(lam <= 1.0);
      sum += lam;
      squares += lam * lam;
    }
    const double mean = sum / n;
    const double variance = squares / n - mean * mean;
    CHECK(mean == doctest::Approx(0.5).epsilon(0.02));
    CHECK(variance == doctest::Approx(1.0 / (4.0 * (2.0 * alpha + 1.0))).epsilon(0.05));
  }
}

TEST_CASE("probability labels are blended as they are") {
  Transform mixup("org.torchhost.mixup");
  Fields batch = make_batch();
  const at::Tensor soft = at::softmax(at::randn({6, kClasses}), 1);
  batch.items[1].second = soft;
  auto out = mixup.apply(9, batch);
  const double lam = tp::mix::draw_mix_params(9, {1.0, 0.0, 0.5, 1.0}, 12, 10).lam;
  CHECK(at::equal(out["label"], soft.roll(1, 0).mul(1.0 - lam).add(soft.mul(lam))));
}

TEST_CASE("errors: bad options name the key; fields that do not fit name the fields") {
  SUBCASE("alpha = 0") {
    Transform t("org.torchhost.mixup", {{"alpha", 0.0}});
    CHECK(t.created == TP_ERR_CONFIG);
    CHECK(t.p.host.last_error.find("alpha") != std::string::npos);
  }
  SUBCASE("switch_prob out of [0, 1]") {
    Transform t("org.torchhost.mixup_cutmix", {{"switch_prob", 1.5}});
    CHECK(t.created == TP_ERR_CONFIG);
    CHECK(t.p.host.last_error.find("switch_prob") != std::string::npos);
  }
  SUBCASE("both alphas 0") {
    Transform t("org.torchhost.mixup_cutmix", {{"mixup_alpha", 0.0}, {"cutmix_alpha", 0.0}});
    CHECK(t.created == TP_ERR_CONFIG);
    CHECK(t.p.host.last_error.find("mixup_alpha") != std::string::npos);
    CHECK(t.p.host.last_error.find("cutmix_alpha") != std::string::npos);
  }
  SUBCASE("num_classes < 1") {
    Transform t("org.torchhost.cutmix", {{"num_classes", int64_t{0}}});
    CHECK(t.created == TP_ERR_CONFIG);
    CHECK(t.p.host.last_error.find("num_classes") != std::string::npos);
  }
  SUBCASE("a missing field, and labels of the wrong width") {
    Transform t("org.torchhost.mixup");
    REQUIRE(t.created == TP_OK);
    Fields wrong{{"image", at::rand({2, 3, 4, 4})}, {"y", at::zeros({2}, at::kLong)}};
    tp_named_tensor_t out[4] = {};
    uint32_t count = 0;
    CHECK(t.t->apply(t.self, 1, wrong.view(), wrong.size(), out, 4, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(t.p.host.last_error.find("'label'") != std::string::npos);
    CHECK(out[0].tensor == nullptr);
    Fields wide{{"image", at::rand({2, 3, 4, 4})}, {"label", at::zeros({2, 7})}};
    CHECK(t.t->apply(t.self, 1, wide.view(), wide.size(), out, 4, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(t.p.host.last_error.find("[B, 5]") != std::string::npos);
    CHECK(t.t->apply(t.self, 1, make_batch().view(), 2, out, 1, &count) == TP_ERR_INVALID_ARGUMENT);  // capacity
  }
  SUBCASE("destroy(NULL) is a no-op (PLG-12)") {
    plugin("mix").table<tp_batch_transform_v1_t>("org.torchhost.mixup", TP_IFACE_BATCH_TRANSFORM_V1).destroy(nullptr);
  }
}

}  // namespace
