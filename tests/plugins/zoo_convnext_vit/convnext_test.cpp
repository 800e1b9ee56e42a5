// org.torchhost.convnext: stochastic depth (the per-block rates against torchvision's, read from
// the committed table; row mode in training, the identity in eval), activation checkpointing
// (bit-identical outputs and gradients), layer depths, configuration and input errors. The rates
// are read from the module itself (convnext_net.cpp is compiled into this test: the C ABI does
// not expose them); everything else goes through the C ABI. Inputs are 32x32, batch 2.
#include "zoo_convnext_vit.h"

#include "convnext_net.h"

namespace {

using namespace tp::test;
using namespace tp::test::zoo;

TEST_CASE("convnext: every block's stochastic-depth rate is torchvision's") {
  for (const auto& [key, expected] : read_table()) {
    if (key.rfind("convnext ", 0) != 0) continue;
    CAPTURE(key);
    tp::convnext::ConvNeXtOptions options;
    options.variant = key.substr(std::string("convnext ").size());
    options.stochastic_depth_prob = tp::convnext::default_stochastic_depth_prob(options.variant);
    options.num_classes = 10;
    const std::vector<double> ours = tp::convnext::ConvNeXt(options).drop_probabilities();
    REQUIRE(ours.size() == expected.drop.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      CAPTURE(expected.drop[i].first);
      CHECK(ours[i] == expected.drop[i].second);  // the same double expression, so exact
    }
  }
  // A configured rate: torchvision's `p * block_id / (total_blocks - 1.0)` over tiny's 18 blocks.
  tp::convnext::ConvNeXtOptions options;
  options.stochastic_depth_prob = 0.3;
  options.num_classes = 10;
  const std::vector<double> rates = tp::convnext::ConvNeXt(options).drop_probabilities();
  REQUIRE(rates.size() == 18);
  for (size_t i = 0; i < rates.size(); ++i) CHECK(rates[i] == 0.3 * static_cast<double>(i) / 17.0);
}

TEST_CASE("convnext: stochastic depth drops whole rows in training and is the identity in eval") {
  at::manual_seed(3);
  const at::Tensor x = at::randn({1000, 4, 2, 2}) + 5.0;  // no zero element
  const at::Tensor y = tp::convnext::stochastic_depth(x, 0.3, /*training=*/true);
  const at::Tensor kept = (y != 0).flatten(1);
  const at::Tensor row_kept = kept.all(1);
  CHECK(at::equal(row_kept, kept.any(1)));  // a row is dropped or kept whole
  const int64_t dropped = 1000 - row_kept.sum().item<int64_t>();
  CHECK(dropped > 225);  // binomial(1000, 0.3): 300 +- 14.5; 225 and 375 are 5 sigma away
  CHECK(dropped < 375);
  CHECK(at::allclose(y.index({row_kept}), x.index({row_kept}) / 0.7));
  CHECK(tp::convnext::stochastic_depth(x, 0.3, /*training=*/false).is_same(x));
  CHECK(tp::convnext::stochastic_depth(x, 0.0, /*training=*/true).is_same(x));
  CHECK(at::equal(tp::convnext::stochastic_depth(x, 1.0, /*training=*/true), at::zeros_like(x)));

  // Through the model: the same weights (the rate draws nothing at construction) give the same
  // eval logits at any rate; in training, two copies of one image get different logits, since
  // each sample draws its own rows.
  ZooModel plain(kConvNeXt, kConvNeXtId, convnext_config("tiny", 10, 0.0), 7);
  ZooModel dropping(kConvNeXt, kConvNeXtId, convnext_config("tiny", 10, 0.9), 7);
  at::manual_seed(4);
  const at::Tensor image = at::randn({1, 3, 32, 32});
  Fields in = {{"image", at::cat({image, image})}};
  at::NoGradGuard no_grad;
  {
    // layer_scale 1e-6 would hide the blocks; make them count.
    for (ZooModel* m : {&plain, &dropping})
      for (const auto& e : m->state())
        if (e.name.find("layer_scale") != std::string::npos) tensor_of(e.handle).fill_(0.5);
  }
  plain.train(false);
  dropping.train(false);
  CHECK(at::equal(plain.forward(in).at("logits"), dropping.forward(in).at("logits")));
  plain.train(true);
  dropping.train(true);
  const at::Tensor same = plain.forward(in).at("logits");
  CHECK(at::equal(same[0], same[1]));
  const at::Tensor differ = dropping.forward(in).at("logits");
  CHECK_FALSE(at::allclose(differ[0], differ[1]));
}

TEST_CASE("convnext: stochastic_depth_prob -1 (the schema's default) is the variant's torchvision rate") {
  // Same construction seed, same seed before a training-mode forward: the logits agree exactly
  // only when every block's rate does (a different rate rescales the rows it keeps).
  at::manual_seed(6);
  Fields in = {{"image", at::randn({4, 3, 32, 32})}};
  auto logits = [&](const std::string& variant, double rate) {
    ZooModel m(kConvNeXt, kConvNeXtId, convnext_config(variant, 10, rate), 7);
    at::NoGradGuard no_grad;
    for (const auto& e : m.state())  // layer_scale 1e-6 would hide the blocks
      if (e.name.find("layer_scale") != std::string::npos) tensor_of(e.handle).fill_(0.5);
    m.train(true);
    at::manual_seed(9);
    return m.forward(in).at("logits");
  };
  CHECK(at::equal(logits("tiny", -1.0), logits("tiny", 0.1)));
  CHECK_FALSE(at::equal(logits("tiny", -1.0), logits("tiny", 0.4)));
  CHECK(at::equal(logits("small", -1.0), logits("small", 0.4)));
  CHECK(at::equal(logits("base", -1.0), logits("base", 0.5)));
}

TEST_CASE("convnext: activation checkpointing gives bit-identical outputs and gradients") {
  // Stochastic depth 0.5, so the recompute must replay the forward's draws.
  at::manual_seed(8);
  const at::Tensor x = at::randn({2, 3, 32, 32});
  const at::Tensor labels = at::tensor({1, 4}, at::kLong);
  auto step = [&](bool checkpointing) {
    ZooModel m(kConvNeXt, kConvNeXtId, convnext_config("tiny", 10, 0.5), 9);
    if (checkpointing) REQUIRE_MESSAGE(m.t->set_activation_checkpointing(m.self, true) == TP_OK, m.error());
    at::manual_seed(10);
    auto out = train_step(m, x, labels);
    Fields in = {{"image", x}};
    CHECK(has_checkpoint_node(m.forward(in).at("logits")) == checkpointing);
    return out;
  };
  const auto off = step(false);
  const auto on = step(true);
  REQUIRE(on.size() == off.size());
  size_t different = 0;
  for (size_t i = 0; i < on.size(); ++i) different += at::equal(on[i], off[i]) ? 0 : 1;
  CHECK(different == 0);
}

TEST_CASE("convnext: layer depths are the stem, then every block and downsampling layer in order") {
  ZooModel m(kConvNeXt, kConvNeXtId, convnext_config("tiny", 10));
  std::vector<std::pair<std::string, uint32_t>> expected = {{"features.0", 0}};
  const int blocks[4] = {3, 3, 9, 3};
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < blocks[stage]; ++b)
      expected.emplace_back("features." + std::to_string(2 * stage + 1) + "." + std::to_string(b),
                            static_cast<uint32_t>(expected.size()));
    if (stage < 3) expected.emplace_back("features." + std::to_string(2 * stage + 2), static_cast<uint32_t>(expected.size()));
  }
  CHECK(layer_depths(m) == expected);
  CHECK(expected.back() == std::pair<std::string, uint32_t>("features.7.2", 21));
  // The head: the classifier's LayerNorm2d and Linear, nothing else.
  CHECK(unclaimed(m, expected) ==
        std::vector<std::string>{"classifier.0.weight", "classifier.0.bias", "classifier.2.weight", "classifier.2.bias"});
}

TEST_CASE("convnext: forward shapes, input checks and configuration errors") {
  ZooModel m(kConvNeXt, kConvNeXtId, convnext_config("tiny", 5, -1.0, 1));
  m.train(false);
  Fields in = {{"image", at::randn({2, 1, 48, 32})}};
  CHECK(m.forward(in).at("logits").sizes() == at::IntArrayRef({2, 5}));

  std::map<std::string, at::Tensor> out;
  Fields rgb = {{"image", at::randn({2, 3, 32, 32})}};
  CHECK(m.try_forward(rgb, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("in_channels = 1") != std::string::npos);
  CHECK(m.error().find("[2, 3, 32, 32]") != std::string::npos);
  Fields small = {{"image", at::randn({2, 1, 16, 32})}};
  CHECK(m.try_forward(small, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("H, W >= 32") != std::string::npos);

  const std::pair<Config, const char*> bad[] = {
      {convnext_config("large"), "org.torchhost.convnext: variant must be \"tiny\", \"small\" or \"base\""},
      {convnext_config("tiny", 0), "org.torchhost.convnext: num_classes must be positive"},
      {convnext_config("tiny", 10, 1.5), "org.torchhost.convnext: stochastic_depth_prob must be in [0, 1] (or -1: the variant's torchvision default), got 1.5"},
      {convnext_config("tiny", 10, -1.0, 0), "org.torchhost.convnext: in_channels must be positive"},
  };
  for (const auto& [config, message] : bad) {
    ZooModel b(kConvNeXt, kConvNeXtId, config, 1, /*expect_ok=*/false);
    CHECK(b.status == TP_ERR_CONFIG);
    CHECK_MESSAGE(b.error().find(message) != std::string::npos, b.error());
  }
  Config zero_scale = convnext_config("tiny");
  zero_scale["layer_scale"] = 0.0;
  ZooModel b(kConvNeXt, kConvNeXtId, zero_scale, 1, /*expect_ok=*/false);
  CHECK(b.status == TP_ERR_CONFIG);
  CHECK(b.error().find("org.torchhost.convnext: layer_scale must be positive, got 0") != std::string::npos);
}

}  // namespace
