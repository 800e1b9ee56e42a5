// efficientnet.so against torchvision 0.29.1 itself, on the fixtures efficientnet_oracle.py writes
// (its `run` mode, the ctest zoo_efficientnet_oracle, sets TP_EFFICIENTNET_FIXTURES and runs these
// cases with --no-skip; a plain run of the binary skips them, as they need .venv-bench):
// torchvision's state_dict loads by name, eval logits, training-mode logits, every parameter's
// gradient and the moved BatchNorm statistics agree, and with dropout and stochastic depth on,
// the same seed drops the same rows and features as torchvision.
#include "zoo_efficientnet/efficientnet_support.h"

#include <cstdlib>

namespace {

using namespace tp::test;

/// What efficientnet_oracle.py's NUMERIC lists: tag, family, variant, whether gradients are saved.
struct OracleCase {
  const char* tag;
  const char* family;
  const char* variant;
  bool gradients;
};
constexpr OracleCase kCases[] = {
    {"efficientnet_b0", "efficientnet", "b0", true},
    {"efficientnet_b3", "efficientnet", "b3", true},
    {"efficientnet_b5", "efficientnet", "b5", false},
    {"mobilenet_v3_small", "mobilenet_v3", "small", true},
    {"mobilenet_v3_large", "mobilenet_v3", "large", true},
};
constexpr double kTolerance = 1e-5;

std::filesystem::path fixture_dir() {
  const char* dir = std::getenv("TP_EFFICIENTNET_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "run through efficientnet_oracle.py run (ctest zoo_efficientnet_oracle)");
  return dir;
}

ZooConfig oracle_config(const OracleCase& c, double dropout, double stochastic_depth_prob) {
  return std::string(c.family) == "efficientnet" ? efficientnet_config(c.variant, 10, dropout, stochastic_depth_prob)
                                                 : mobilenet_v3_config(c.variant, 10, dropout);
}


TEST_CASE("efficientnet: torchvision oracle: logits, gradients and statistics" * doctest::skip()) {
  const auto dir = fixture_dir();
  for (const OracleCase& c : kCases) {
    CAPTURE(std::string(c.tag));
    const auto weights = load_python_dict(dir / (std::string(c.tag) + "_weights.pt"));
    const auto io = load_python_dict(dir / (std::string(c.tag) + "_io.pt"));
    ZooModel m(kEfficientNetLibrary, component_id(c.family), oracle_config(c, 0.0, 0.0));
    load_weights(m, weights);
    Fields in = {{"image", io.at("x")}};

    m.train(false);
    const double eval_diff = relative_difference(m.forward(in).at("logits").detach(), io.at("eval"));
    m.train(true);
    const at::Tensor logits = m.forward(in).at("logits");
    const double train_diff = relative_difference(logits.detach(), io.at("train"));
    double grad_diff = 0.0, stats_diff = 0.0;
    if (c.gradients) {
      at::cross_entropy_loss(logits, io.at("label")).backward();
      for (const auto& e : m.state()) {
        if (e.is_buffer) continue;
        CAPTURE(e.name);
        const double d = relative_difference(tensor_of(e.handle).grad(), io.at("grad." + e.name));
        CHECK(d <= kTolerance);
        grad_diff = std::max(grad_diff, d);
      }
    }
    // The training-mode forward moved the running statistics as torchvision's did (momentum).
    for (const auto& e : m.state()) {
      if (!e.is_buffer) continue;
      CAPTURE(e.name);
      const at::Tensor& ours = tensor_of(e.handle);
      if (ours.is_floating_point()) {
        const double d = relative_difference(ours, io.at("after." + e.name));
        CHECK(d <= kTolerance);
        stats_diff = std::max(stats_diff, d);
      } else {
        CHECK(at::equal(ours, io.at("after." + e.name)));
      }
    }
    MESSAGE(std::string(c.tag) << " vs torchvision: eval " << eval_diff << ", train " << train_diff << ", gradients (max) "
                  << grad_diff << ", running statistics (max) " << stats_diff);
    CHECK(eval_diff <= kTolerance);
    CHECK(train_diff <= kTolerance);
  }
}

TEST_CASE("efficientnet: torchvision oracle: dropout and stochastic depth draw as torchvision" * doctest::skip()) {
  // Dropout 0.3 and stochastic_depth_prob 0.5 after one seed: equal logits need the same
  // per-block probabilities, the same draws in the same order, and the same rescaling.
  const auto dir = fixture_dir();
  for (const OracleCase& c : kCases) {
    CAPTURE(std::string(c.tag));
    ZooModel m(kEfficientNetLibrary, component_id(c.family), oracle_config(c, 0.3, 0.5));
    load_weights(m, load_python_dict(dir / (std::string(c.tag) + "_weights.pt")));
    const auto io = load_python_dict(dir / (std::string(c.tag) + "_io.pt"));
    Fields in = {{"image", io.at("x")}};
    m.train(true);
    at::manual_seed(1234);
    at::NoGradGuard no_grad;
    const double diff = relative_difference(m.forward(in).at("logits"), io.at("random"));
    MESSAGE(std::string(c.tag) << " with dropout and stochastic depth vs torchvision: " << diff);
    CHECK(diff <= kTolerance);
  }
}

}  // namespace
