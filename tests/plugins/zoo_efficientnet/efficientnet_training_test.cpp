// efficientnet.so in training: stochastic depth (row mode, identity in eval), the classifier
// dropout each variant defaults to, and activation checkpointing (bit-identical outputs,
// gradients and BatchNorm statistics). Inputs are small (32x32 or 64x64, batch <= 8): two CPU cores.
#include "zoo_efficientnet/efficientnet_support.h"

#include <cmath>

#include "blocks.h"

namespace {

using namespace tp::test;

TEST_CASE("efficientnet: stochastic_depth is torchvision's row mode") {
  at::manual_seed(3);
  const at::Tensor x = at::ones({20000, 2, 1, 1});
  const at::Tensor y = tp::efficientnet::stochastic_depth(x, 0.3, /*training=*/true);
  // Whole rows are zeroed or scaled by 1 / 0.7, never single elements.
  const at::Tensor kept = y.select(1, 0).flatten() != 0;
  CHECK(at::equal(y.select(1, 0), y.select(1, 1)));
  CHECK((y.masked_select(y != 0) - 1.0 / 0.7).abs().max().item<double>() < 1e-6);
  CHECK(1.0 - kept.to(at::kDouble).mean().item<double>() == doctest::Approx(0.3).epsilon(0.05));
  CHECK(tp::efficientnet::stochastic_depth(x, 0.3, /*training=*/false).is_same(x));
  CHECK(tp::efficientnet::stochastic_depth(x, 0.0, /*training=*/true).is_same(x));
}

TEST_CASE("efficientnet: stochastic depth drops residual branches per sample in training, never in eval") {
  // Eight copies of one image, BatchNorm frozen (eval statistics, so rows do not mix) while
  // stochastic depth trains: without it every row of the logits is the same; with it each row
  // has its own dropped branches, so rows differ. Dropout 0 isolates it.
  at::manual_seed(7);
  const at::Tensor image = at::randn({1, 3, 32, 32}).expand({8, 3, 32, 32}).contiguous();
  std::map<double, at::Tensor> train, eval;
  for (double p : {0.0, 0.5}) {
    ZooModel m(kEfficientNetLibrary, kEfficientNetId, efficientnet_config("b0", 10, 0.0, p));
    Fields in = {{"image", image}};
    m.train(false);
    eval[p] = m.forward(in).at("logits").detach();
    REQUIRE(m.t->set_batchnorm_frozen(m.self, true) == TP_OK);
    m.train(true);
    at::manual_seed(11);
    train[p] = m.forward(in).at("logits").detach();
  }
  const auto row_spread = [](const at::Tensor& logits) {
    return relative_difference(logits, logits.select(0, 0).unsqueeze(0).expand_as(logits));
  };
  CHECK(row_spread(train[0.0]) < 1e-5);
  CHECK(row_spread(train[0.5]) > 1e-4);  // measured 1.4e-3; equal rows stay below 1e-5
  // Some rows differ from others: a per-row ("row") draw, not one for the whole batch.
  int64_t distinct = 0;
  for (int64_t i = 1; i < 8; ++i) distinct += relative_difference(train[0.5][i], train[0.5][0]) > 1e-5 ? 1 : 0;
  CHECK(distinct > 0);
  // Eval: the probability changes nothing (same seed, same weights).
  CHECK(at::equal(eval[0.0], eval[0.5]));
}

TEST_CASE("efficientnet: the classifier dropout defaults to torchvision's per variant") {
  // With one sample, a feature the dropout zeroed leaves its column of the classifier's weight
  // gradient exactly 0 (SiLU features are never exactly 0 otherwise), so the zero columns count
  // the dropped features. 64x64 keeps 2x2 at the last BatchNorm, which needs > 1 value in training.
  const std::pair<const char*, double> cases[] = {{"b0", 0.2}, {"b2", 0.3}, {"b4", 0.4}, {"b6", 0.5}};
  for (const auto& [variant, p] : cases) {
    CAPTURE(std::string(variant));
    // -1: the variant's default; dropout 0, the control, on B0 only (B6 takes seconds to build).
    for (double dropout : {-1.0, 0.0}) {
      if (dropout == 0.0 && std::string(variant) != "b0") continue;
      ZooModel m(kEfficientNetLibrary, kEfficientNetId, efficientnet_config(variant, 10, dropout, 0.0));
      m.train(true);
      // Only the classifier's weight needs a gradient: backward then skips the depthwise
      // convolutions, whose CPU backward is slow.
      for (const auto& e : m.state())
        if (!e.is_buffer && e.name != "classifier.1.weight") tensor_of(e.handle).requires_grad_(false);
      at::manual_seed(5);
      Fields in = {{"image", at::randn({1, 3, 64, 64})}};
      m.forward(in).at("logits").square().sum().backward();
      const at::Tensor zero_columns = (m.named("classifier.1.weight").grad().abs().sum(0) == 0);
      const double dropped = zero_columns.to(at::kDouble).mean().item<double>();
      MESSAGE(std::string(variant) << " dropout " << dropout << ": " << dropped << " of " << zero_columns.numel()
                                   << " features dropped");
      if (dropout == 0.0) CHECK(dropped == 0.0);
      // Within 4 standard deviations of the default, less than half the 0.1 between defaults.
      else CHECK(std::abs(dropped - p) <= 4 * std::sqrt(p * (1 - p) / static_cast<double>(zero_columns.numel())));
    }
  }
}

TEST_CASE("efficientnet: activation checkpointing gives bit-identical outputs, gradients and statistics") {
  // Default dropout and stochastic depth are on: their draws inside checkpointed blocks must be
  // replayed identically by the recompute. 32x32: every block runs, the last ones at 1x1.
  struct Case {
    const char* id;
    ZooConfig config;
  };
  const Case cases[] = {{kEfficientNetId, efficientnet_config("b0", 10)}, {kMobileNetV3Id, mobilenet_v3_config("small", 10)}};
  for (const Case& c : cases) {
    CAPTURE(std::get<std::string>(c.config.at("variant")));
    const auto off = checkpointing_step(kEfficientNetLibrary, c.id, c.config, false, 32);
    const auto on = checkpointing_step(kEfficientNetLibrary, c.id, c.config, true, 32);
    REQUIRE(on.size() == off.size());
    size_t different = 0;
    for (size_t i = 0; i < on.size(); ++i) different += at::equal(on[i], off[i]) ? 0 : 1;
    CHECK(different == 0);
  }
  // Eval mode never checkpoints.
  ZooModel m(kEfficientNetLibrary, kEfficientNetId, efficientnet_config("b0", 10));
  REQUIRE(m.t->set_activation_checkpointing(m.self, true) == TP_OK);
  m.train(false);
  Fields in = {{"image", at::randn({1, 3, 32, 32})}};
  CHECK_FALSE(has_checkpoint_node(m.forward(in).at("logits")));
}

TEST_CASE("efficientnet: freeze_bn_stats keeps every BatchNorm's statistics") {
  // The adapter's set_batchnorm_frozen finds the BatchNorm2d layers under the nested containers.
  for (const char* id : {kEfficientNetId, kMobileNetV3Id}) {
    for (bool frozen : {true, false}) {
      CAPTURE(std::string(id));
      CAPTURE(frozen);
      const ZooConfig config =
          std::string(id) == kEfficientNetId ? efficientnet_config("b0", 10) : mobilenet_v3_config("small", 10);
      ZooModel m(kEfficientNetLibrary, id, config);
      REQUIRE_MESSAGE(m.t->set_batchnorm_frozen(m.self, frozen) == TP_OK, m.error());
      const auto [moved, total] = buffers_moved_by_forward(m);
      // Three buffers per BatchNorm; unfrozen, each one moves.
      CHECK(moved == (frozen ? 0 : total));
    }
  }
}

TEST_CASE("efficientnet, mobilenet_v3: fused_norm = true and false build the same model and, on the CPU, compute the same bits") {
  // On the CPU every BatchNorm runs tp::cpp::batch_norm_act's module path: the same ops as
  // fused_norm = false, so the logits and statistics are equal bit for bit, for each activation
  // the families use (SiLU; ReLU and Hardswish; none after the projections).
  struct Case {
    const char* id;
    ZooConfig on, off;
    const char* buffer;  // a BatchNorm statistic that training moves
  };
  const Case cases[] = {
      {kEfficientNetId, efficientnet_config("b0", 10, 0.0, 0.0, 3, true), efficientnet_config("b0", 10, 0.0, 0.0, 3, false),
       "features.2.0.block.1.1.running_var"},
      {kMobileNetV3Id, mobilenet_v3_config("small", 10, 0.0, 3, true), mobilenet_v3_config("small", 10, 0.0, 3, false),
       "features.3.block.0.1.running_mean"},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.id));
    at::manual_seed(31);
    ZooModel on(kEfficientNetLibrary, c.id, c.on);
    at::manual_seed(31);
    ZooModel off(kEfficientNetLibrary, c.id, c.off);
    at::manual_seed(32);
    const at::Tensor image = at::randn({2, 3, 32, 32}).contiguous(at::MemoryFormat::ChannelsLast);
    for (const bool training : {true, false}) {
      CAPTURE(training);
      on.train(training);
      off.train(training);
      Fields in_on = {{"image", image}};
      Fields in_off = {{"image", image}};
      CHECK(at::equal(on.forward(in_on).at("logits"), off.forward(in_off).at("logits")));
    }
    CHECK(at::equal(on.named(c.buffer), off.named(c.buffer)));
  }
}

}  // namespace
