// The zoo beyond ResNet at 224x224 (issue 18): the counted MACs equal FlopCounterMode's count on
// torchvision's own model and match torchvision's published GFLOPS (its model docs list GMACs,
// rounded to two decimals). FlopCounterMode figures (torch 2.14.1, torchvision 0.29.1, batch 1,
// eval mode, in FLOPs = 2 x MACs) are committed here as the oracle's output, like the state
// tables of tests/plugins/zoo_*; tests/unit/profile/zoo_flop_oracle.py prints them again.
// ViT: FlopCounterMode on the CPU counts no attention (torch's CPU flash kernel has no formula
// registered), so its figure (train mode, where nn.MultiheadAttention's fast path is off and every
// projection is an addmm) plus sdpa_flop_count's formula for the 12 attentions is the oracle.
#include "profile_test_util.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "tp/framework/plugin/model_inputs.h"
#include "tp/framework/profile/model_profile.h"

namespace {

using namespace tp;

struct Case {
  const char* library;
  const char* id;
  const char* variant;
  int64_t parameters;
  int64_t oracle_flops;    ///< FlopCounterMode (plus the attention formula for ViT)
  double published_gmacs;  ///< torchvision's docs, two decimals
};

void check(const Case& c) {
  CAPTURE(c.id);
  CAPTURE(c.variant);
  toml::table options;
  options.insert("variant", c.variant);
  auto model = test::make_model(c.library, c.id, options);
  CHECK(measure_size(model->state()).parameters == c.parameters);
  model->set_training(false);
  const NamedTensors batch = example_batch(test::examples_of(c.library, c.id), 1);
  REQUIRE(batch.front().second.sizes() == at::IntArrayRef({1, 3, 224, 224}));
  const auto [flops, ops] = count_forward_flops(*model, batch);
  const double gmacs = static_cast<double>(flops) / 2e9;
  const std::string what = std::string(c.id) + " " + c.variant;
  MESSAGE(what << ": " << gmacs << " GMACs (FlopCounterMode " << c.oracle_flops / 2e9
                << ", published " << c.published_gmacs << ")");
  CHECK(flops == c.oracle_flops);
  CHECK(std::fabs(gmacs - c.published_gmacs) <= 0.005 + 1e-9);
}

}  // namespace

TEST_CASE("EfficientNet-B0 and MobileNetV3 at 224x224: FlopCounterMode's FLOPs and the published GMACs") {
  check({"efficientnet", "org.torchhost.efficientnet", "b0", 5'288'548, 771'629'504, 0.39});
  check({"efficientnet", "org.torchhost.mobilenet_v3", "large", 5'483'032, 433'179'520, 0.22});
  check({"efficientnet", "org.torchhost.mobilenet_v3", "small", 2'542'856, 113'020'800, 0.06});
}

TEST_CASE("ConvNeXt-Tiny and ViT-B/16 at 224x224: FlopCounterMode's FLOPs and the published GMACs") {
  check({"convnext", "org.torchhost.convnext", "tiny", 28'589'128, 8'911'062'528, 4.46});
  // 16.848500736 GMACs of convolution and addmm, plus 12 x sdpa_flop_count([1, 12, 197, 64] x 3).
  check({"vit", "org.torchhost.vit", "b_16", 86'567'656, 33'697'001'472 + 12 * 4 * 12 * 197 * 197 * 64, 17.56});
}
