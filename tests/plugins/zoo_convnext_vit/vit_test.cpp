// org.torchhost.vit through its C ABI: activation checkpointing (bit-identical outputs and
// gradients, with dropout, attention dropout and drop path replayed), drop path (the identity in
// eval), layer depths, configuration and input errors. ViT-B/16 at image_size 32 (5 tokens),
// batch 2: its 86M parameters dominate the time, not the tokens.
#include "zoo_convnext_vit.h"

namespace {

using namespace tp::test;
using namespace tp::test::zoo;

TEST_CASE("vit: activation checkpointing gives bit-identical outputs and gradients") {
  at::manual_seed(8);
  const at::Tensor x = at::randn({2, 3, 32, 32});
  const at::Tensor labels = at::tensor({1, 4}, at::kLong);
  auto step = [&](bool checkpointing) {
    ZooModel m(kViT, kViTId, vit_config("b_16", 32, 10, 0.1, 0.1, 0.2), 9);
    {
      // The zero-initialised head would give every earlier parameter a zero gradient.
      at::NoGradGuard no_grad;
      m.named("heads.head.weight").normal_(0.0, 0.02);
    }
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
  size_t different = 0, zero = 0;
  for (size_t i = 0; i < on.size(); ++i) {
    different += at::equal(on[i], off[i]) ? 0 : 1;
    zero += at::equal(off[i], at::zeros_like(off[i])) ? 1 : 0;
  }
  CHECK(different == 0);
  CHECK(zero == 0);  // every gradient is exercised
}

TEST_CASE("vit: dropout and drop path act in training only") {
  at::manual_seed(4);
  Fields in = {{"image", at::randn({2, 3, 32, 32})}};
  ZooModel plain(kViT, kViTId, vit_config("b_32", 32, 10), 7);
  ZooModel noisy(kViT, kViTId, vit_config("b_32", 32, 10, 0.1, 0.1, 0.5), 7);  // same draws at construction
  at::NoGradGuard no_grad;
  for (ZooModel* m : {&plain, &noisy}) m->named("heads.head.weight").fill_(0.01);
  plain.train(false);
  noisy.train(false);
  CHECK(at::equal(plain.forward(in).at("logits"), noisy.forward(in).at("logits")));
  plain.train(true);
  noisy.train(true);
  CHECK(at::equal(plain.forward(in).at("logits"), plain.forward(in).at("logits")));
  CHECK_FALSE(at::allclose(plain.forward(in).at("logits"), noisy.forward(in).at("logits")));
}

TEST_CASE("vit: layer depths are the embeddings, then every encoder layer") {
  ZooModel m(kViT, kViTId, vit_config("b_32", 32, 10));
  std::vector<std::pair<std::string, uint32_t>> expected = {
      {"conv_proj", 0}, {"class_token", 0}, {"encoder.pos_embedding", 0}};
  for (uint32_t i = 0; i < 12; ++i) expected.emplace_back("encoder.layers.encoder_layer_" + std::to_string(i), i + 1);
  CHECK(layer_depths(m) == expected);
  // The head: the final LayerNorm and the classifier.
  CHECK(unclaimed(m, expected) ==
        std::vector<std::string>{"encoder.ln.weight", "encoder.ln.bias", "heads.head.weight", "heads.head.bias"});
}

TEST_CASE("vit: forward shapes, input checks and configuration errors") {
  ZooModel m(kViT, kViTId, vit_config("b_32", 64, 5));
  m.train(false);
  Fields in = {{"image", at::randn({3, 3, 64, 64})}};
  CHECK(m.forward(in).at("logits").sizes() == at::IntArrayRef({3, 5}));
  REQUIRE(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
  CHECK((m.forward(in).at("logits").scalar_type() == at::kDouble));  // float32 batch cast to the model

  std::map<std::string, at::Tensor> out;
  Fields wrong_size = {{"image", at::randn({2, 3, 96, 96})}};
  CHECK(m.try_forward(wrong_size, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("image_size = 64") != std::string::npos);
  CHECK(m.error().find("[2, 3, 96, 96]") != std::string::npos);
  Fields other = {{"pixels", at::randn({2, 3, 64, 64})}};
  CHECK(m.try_forward(other, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("'image'") != std::string::npos);

  const std::pair<Config, const char*> bad[] = {
      {vit_config("h_14"), "org.torchhost.vit: variant must be \"b_16\", \"b_32\" or \"l_16\""},
      {vit_config("b_16", 100), "org.torchhost.vit: image_size must be a positive multiple of the patch size 16"},
      {vit_config("b_32", 48), "org.torchhost.vit: image_size must be a positive multiple of the patch size 32"},
      {vit_config("b_16", 0), "org.torchhost.vit: image_size must be a positive multiple"},
      {vit_config("b_16", 224, 0), "org.torchhost.vit: num_classes must be positive"},
      {vit_config("b_16", 224, 10, 1.5), "org.torchhost.vit: dropout must be in [0, 1], got 1.5"},
      {vit_config("b_16", 224, 10, 0.0, -0.1), "org.torchhost.vit: attention_dropout must be in [0, 1], got -0.1"},
      {vit_config("b_16", 224, 10, 0.0, 0.0, 2.0), "org.torchhost.vit: drop_path must be in [0, 1], got 2"},
  };
  for (const auto& [config, message] : bad) {
    ZooModel b(kViT, kViTId, config, 1, /*expect_ok=*/false);
    CHECK(b.status == TP_ERR_CONFIG);
    CHECK_MESSAGE(b.error().find(message) != std::string::npos, b.error());
  }
}

}  // namespace
