// org.torchhost.resnet's drop_path_rate (timm's stochastic depth) without Python: the rule of the
// per-block rates, the refused values, 0 as today's network (no draws, the same bits), eval mode
// untouched, activation checkpointing bit-identical with masks drawn, fused_norm on and off alike on
// the CPU, channels-last kept, and bfloat16 autocast. timm itself: resnet_timm_oracle_test.cpp.
#include "plugins/models/zoo_model.h"

#include <ATen/autocast_mode.h>

#include "resnet_net.h"

namespace {

using namespace tp::test;
using Config = std::map<std::string, FakeConfig::Value>;

constexpr const char* kLibrary = "resnet";
constexpr const char* kId = "org.torchhost.resnet";

Config config(int64_t depth, double drop_path_rate, bool fused_norm = true) {
  return {{"depth", depth},         {"num_classes", int64_t{10}}, {"in_channels", int64_t{3}},
          {"zero_init_residual", false}, {"fused_norm", fused_norm}, {"input", std::string("image")},
          {"drop_path_rate", drop_path_rate}};
}

/// Training- (or eval-) mode logits of `m` on `image` after at::manual_seed(seed).
at::Tensor logits_after_seed(ZooModel& m, const at::Tensor& image, bool training, uint64_t seed = 3) {
  m.train(training);
  at::manual_seed(seed);
  Fields in = {{"image", image}};
  at::NoGradGuard no_grad;
  return m.forward(in).at("logits");
}

TEST_CASE("resnet drop_path_rate: timm's rule, rate * i / (blocks - 1), first block 0, last the rate") {
  for (const int64_t depth : {18, 34, 50}) {
    CAPTURE(depth);
    tp::resnet::ResNetOptions options;
    options.depth = depth;
    CHECK(tp::resnet::ResNet(options).drop_path_rates() == std::vector<double>(depth == 18 ? 8 : 16, 0.0));
    options.drop_path_rate = 0.3;
    const std::vector<double> rates = tp::resnet::ResNet(options).drop_path_rates();
    REQUIRE(rates.size() == (depth == 18 ? 8u : 16u));
    CHECK(rates.front() == 0.0);
    CHECK(rates.back() == 0.3);
    for (size_t i = 0; i < rates.size(); ++i)
      CHECK(rates[i] == doctest::Approx(0.3 * static_cast<double>(i) / static_cast<double>(rates.size() - 1)));
  }
}

TEST_CASE("resnet drop_path_rate outside [0, 1) is refused naming the key") {
  for (const double bad : {1.0, -0.1, 1.5}) {
    CAPTURE(bad);
    ZooModel m(kLibrary, kId, config(18, bad), 1, /*expect_ok=*/false);
    CHECK(m.status == TP_ERR_CONFIG);
    CHECK(m.error().find("org.torchhost.resnet: drop_path_rate must be in [0, 1)") != std::string::npos);
  }
  ZooModel nan(kLibrary, kId, config(18, std::nan("")), 1, /*expect_ok=*/false);
  CHECK(nan.status == TP_ERR_CONFIG);
}

TEST_CASE("resnet drop_path_rate 0 draws nothing; a rate changes training only, and eval not at all") {
  const at::Tensor image = (at::manual_seed(4), at::randn({8, 3, 32, 32}));
  ZooModel off(kLibrary, kId, config(18, 0.0));
  ZooModel on(kLibrary, kId, config(18, 0.5));  // the same seed: the same weights
  // Eval first (a training forward moves the running statistics, differently under other masks):
  // with a rate the network is the rate-0 one, bit for bit, and draws nothing.
  const at::Tensor eval_on = logits_after_seed(on, image, false);
  const at::Tensor next_on = at::randn({4});
  CHECK(at::equal(eval_on, logits_after_seed(off, image, false)));
  at::manual_seed(3);
  CHECK(at::equal(next_on, at::randn({4})));
  // 0: the training forward leaves the generator where it was (no mask drawn).
  const at::Tensor train_off = logits_after_seed(off, image, true);
  const at::Tensor next_off = at::randn({4});
  at::manual_seed(3);
  CHECK(at::equal(next_off, at::randn({4})));
  // 0.5: masks drawn, and the logits differ from rate 0's.
  CHECK_FALSE(at::equal(logits_after_seed(on, image, true), train_off));
}

TEST_CASE("resnet drop_path_rate: activation checkpointing replays the masks, bit-identical") {
  for (const int64_t depth : {18, 50}) {
    CAPTURE(depth);
    const auto off = checkpointing_step(kLibrary, kId, config(depth, 0.5), false, 32);
    const auto on = checkpointing_step(kLibrary, kId, config(depth, 0.5), true, 32);
    const auto plain = checkpointing_step(kLibrary, kId, config(depth, 0.0), false, 32);
    REQUIRE(on.size() == off.size());
    size_t different = 0;
    for (size_t i = 0; i < on.size(); ++i) different += at::equal(on[i], off[i]) ? 0 : 1;
    CHECK(different == 0);
    CHECK_FALSE(at::equal(off[0], plain[0]));  // masks were drawn: the logits are not rate 0's
  }
}

TEST_CASE("resnet drop_path_rate: fused_norm on and off compute the same bits on the CPU, channels-last kept") {
  at::manual_seed(22);
  const at::Tensor image = at::randn({8, 3, 32, 32}).contiguous(at::MemoryFormat::ChannelsLast);
  ZooModel fused(kLibrary, kId, config(18, 0.5, true));
  ZooModel unfused(kLibrary, kId, config(18, 0.5, false));
  CHECK(at::equal(logits_after_seed(fused, image, true), logits_after_seed(unfused, image, true)));
  for (const char* name : {"layer4.1.bn2.running_var", "layer2.0.downsample.1.running_mean"})
    CHECK_MESSAGE(at::equal(fused.named(name), unfused.named(name)), name);

  // The mask multiplies a channels-last branch into a channels-last result, so every stage's
  // output stays channels-last (run.channels_last's layout reaches the next convolution).
  tp::resnet::ResNetOptions options;
  options.drop_path_rate = 0.5;
  tp::resnet::ResNet net(options);
  net.train(true);
  at::NoGradGuard no_grad;
  for (const at::Tensor& stage : net.stages(image)) CHECK(stage.is_contiguous(at::MemoryFormat::ChannelsLast));
}

TEST_CASE("resnet drop_path_rate under CPU bfloat16 autocast: masks in the branch's dtype, a finite step") {
  ZooModel m(kLibrary, kId, config(18, 0.5));
  m.train(true);
  at::manual_seed(9);
  Fields in = {{"image", at::randn({8, 3, 32, 32})}};
  at::Tensor logits;
  {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    logits = m.forward(in).at("logits");
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
  }
  CHECK((logits.scalar_type() == at::kBFloat16));
  at::cross_entropy_loss(logits.to(at::kFloat), at::randint(0, 10, {8}, at::kLong)).backward();
  for (const auto& e : m.state()) {
    if (e.is_buffer) continue;
    CAPTURE(e.name);
    const at::Tensor grad = tensor_of(e.handle).grad();
    REQUIRE(grad.defined());
    CHECK(grad.isfinite().all().item<bool>());
  }
}

}  // namespace
