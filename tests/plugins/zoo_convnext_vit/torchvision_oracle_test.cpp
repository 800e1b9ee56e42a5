// convnext.so and vit.so against torchvision 0.29 itself, on the fixtures torchvision_oracle.py
// writes (its docstring lists them). The suite is skipped in the plain run of this binary;
// `torchvision_oracle.py check <this binary>` (ctest zoo_convnext_vit_oracle, which reports SKIP
// without .venv-bench) writes the fixtures and runs it with --no-skip. Per case:
//   - the same seed gives torchvision's initial weights, bit for bit (the same draws in the same
//     order from the global generator);
//   - torchvision's weights, copied in by name, give its eval logits and, in training mode, its
//     logits and every parameter's gradient, to 1e-5 relative (max |a - b| / max |b|);
//   - with randomness on (ConvNeXt stochastic depth 0.5; ViT dropout, attention dropout and
//     timm's DropPath) the same seed gives the same training-mode logits: the same rows and
//     elements are dropped, so the per-block rates and the draw order are torchvision's (timm's).
#include "zoo_convnext_vit.h"

#include <cstdlib>

namespace {

using namespace tp::test;
using namespace tp::test::zoo;

constexpr double kTolerance = 1e-5;
constexpr uint64_t kRandomSeed = 5;  // torchvision_oracle.py's RANDOM_SEED

std::filesystem::path fixture_dir() {
  const char* dir = std::getenv("TP_ZOO_CONVNEXT_VIT_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "run through torchvision_oracle.py check (it sets TP_ZOO_CONVNEXT_VIT_FIXTURES)");
  return dir;
}

struct Case {
  const char* name;   // fixture stem
  const char* library;
  const char* id;
  Config config;      // dropout and stochastic depth off
  Config random;      // torchvision_oracle.py's randomness on
  uint64_t seed;      // torchvision's construction seed
};

void check_case(const Case& c) {
  const std::string name = c.name;
  CAPTURE(name);
  const std::filesystem::path dir = fixture_dir();
  ZooModel m(c.library, c.id, c.config, c.seed);

  // 1. Initialisation: bit for bit.
  {
    const auto init = load_python_dict(dir / (std::string(c.name) + "_init.pt"));
    size_t different = 0;
    double worst = 0.0;
    for (const auto& e : m.state()) {
      CAPTURE(e.name);
      REQUIRE(init.count(e.name) == 1);
      const at::Tensor& ours = tensor_of(e.handle);
      if (at::equal(ours, init.at(e.name))) continue;
      ++different;
      worst = std::max(worst, (ours - init.at(e.name)).abs().max().item<double>());
    }
    MESSAGE(name << ": initial tensors differing from torchvision's " << different << " (max |diff| " << worst << ")");
    CHECK(different == 0);
  }

  // 2. torchvision's weights: eval logits, then training-mode logits and gradients.
  const auto weights = load_python_dict(dir / (std::string(c.name) + "_weights.pt"));
  load_weights(m, weights);
  const auto io = load_python_dict(dir / (std::string(c.name) + "_io.pt"));
  Fields in = {{"image", io.at("x")}};
  m.train(false);
  double eval_diff = 0.0;
  {
    at::NoGradGuard no_grad;
    eval_diff = relative_difference(m.forward(in).at("logits"), io.at("eval"));
  }
  const auto step = train_step(m, io.at("x"), io.at("labels"));
  const double train_diff = relative_difference(step[0], io.at("train"));
  double grad_diff = 0.0;
  std::string worst_grad;
  size_t i = 1;
  for (const auto& e : m.state()) {
    CAPTURE(e.name);
    REQUIRE(io.count("grad." + e.name) == 1);
    const double d = relative_difference(step.at(i++), io.at("grad." + e.name));
    CHECK(d <= kTolerance);
    if (d > grad_diff) grad_diff = d, worst_grad = e.name;
  }
  MESSAGE(name << ": relative difference to torchvision: eval logits " << eval_diff << ", train logits "
                 << train_diff << ", gradients max " << grad_diff << " (" << worst_grad << ")");
  CHECK(eval_diff <= kTolerance);
  CHECK(train_diff <= kTolerance);

  // 3. Randomness on: the same seed drops the same rows and elements.
  ZooModel noisy(c.library, c.id, c.random);
  load_weights(noisy, weights);
  noisy.train(true);
  at::manual_seed(kRandomSeed);
  at::NoGradGuard no_grad;
  const double random_diff = relative_difference(noisy.forward(in).at("logits"), io.at("random_train"));
  MESSAGE(name << ": training-mode logits with randomness on, same seed: relative difference " << random_diff);
  CHECK(random_diff <= kTolerance);
}

TEST_SUITE("torchvision_oracle" * doctest::skip()) {
  TEST_CASE("convnext_tiny against torchvision: initialisation, logits, gradients, stochastic depth") {
    check_case({"convnext_tiny", kConvNeXt, kConvNeXtId, convnext_config("tiny", 10, 0.0),
                convnext_config("tiny", 10, 0.5), 11});
  }
  TEST_CASE("vit_b_16 (image_size 32) against torchvision: initialisation, logits, gradients, dropout, drop path") {
    check_case({"vit_b_16", kViT, kViTId, vit_config("b_16", 32, 10), vit_config("b_16", 32, 10, 0.1, 0.1, 0.2), 12});
  }
  TEST_CASE("vit_b_32 (image_size 64) against torchvision: initialisation, logits, gradients, dropout, drop path") {
    check_case({"vit_b_32", kViT, kViTId, vit_config("b_32", 64, 10), vit_config("b_32", 64, 10, 0.1, 0.1, 0.2), 13});
  }
}

}  // namespace
