// org.torchhost.resnet's drop_path_rate against timm 1.0.31's ResNet with DropPath, on the fixtures
// resnet_timm_oracle.py writes (its docstring lists them). The suite is skipped in the plain run of
// zoo_tests; `resnet_timm_oracle.py check <zoo_tests>` (ctest resnet_drop_path_timm_oracle, which
// reports SKIP without .venv-bench) writes the fixtures and runs it with --no-skip. Per case:
//   - every block's drop rate equals timm's list exactly (ResNet::drop_path_rates, resnet_net.cpp
//     compiled in: the C ABI does not expose them), for resnet18/34/50 at two rates;
//   - timm's weights, copied in by name: eval logits, then after the same mask seed the
//     training-mode logits, every parameter's gradient and every BatchNorm statistic equal timm's
//     to kTolerance relative (kBf16Tolerance under CPU bfloat16 autocast): the same samples'
//     branches dropped in the same blocks, scaled alike.
#include "plugins/models/zoo_model.h"

#include <ATen/autocast_mode.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "resnet_net.h"

namespace {

using namespace tp::test;
using Config = std::map<std::string, FakeConfig::Value>;

constexpr double kTolerance = 1e-5;
constexpr double kBf16Tolerance = 2e-2;
constexpr uint64_t kMaskSeed = 7;        // resnet_timm_oracle.py's MASK_SEED
constexpr double kDropPathRate = 0.5;    // its DROP_PATH_RATE

std::filesystem::path fixture_dir() {
  const char* dir = std::getenv("TP_RESNET_TIMM_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "run through resnet_timm_oracle.py check (it sets TP_RESNET_TIMM_FIXTURES)");
  return dir;
}

/// CPU bfloat16 autocast for its lifetime, as torch.autocast("cpu", dtype=torch.bfloat16).
class CpuBf16Autocast {
 public:
  CpuBf16Autocast() {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuBf16Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCPU, false);
  }
  CpuBf16Autocast(const CpuBf16Autocast&) = delete;
  CpuBf16Autocast& operator=(const CpuBf16Autocast&) = delete;
};

void check_case(const char* name, int64_t depth, bool bf16) {
  CAPTURE(name);
  const double tolerance = bf16 ? kBf16Tolerance : kTolerance;
  const std::filesystem::path dir = fixture_dir();
  const Config config = {{"depth", depth},         {"num_classes", int64_t{10}}, {"in_channels", int64_t{3}},
                         {"zero_init_residual", false}, {"fused_norm", true},  {"input", std::string("image")},
                         {"drop_path_rate", kDropPathRate}};
  ZooModel m("resnet", "org.torchhost.resnet", config);
  load_weights(m, load_python_dict(dir / (std::string(name) + "_weights.pt")));
  const auto io = load_python_dict(dir / (std::string(name) + "_io.pt"));
  Fields in = {{"image", io.at("x")}};
  std::optional<CpuBf16Autocast> autocast;
  if (bf16) autocast.emplace();

  m.train(false);
  double eval_diff = 0.0;
  {
    at::NoGradGuard no_grad;
    eval_diff = relative_difference(m.forward(in).at("logits").to(at::kFloat), io.at("eval"));
  }
  m.train(true);
  at::manual_seed(kMaskSeed);
  const at::Tensor logits = m.forward(in).at("logits");
  autocast.reset();  // timm's loss and backward ran outside autocast
  at::cross_entropy_loss(logits.to(at::kFloat), io.at("labels")).backward();
  const double train_diff = relative_difference(logits.detach().to(at::kFloat), io.at("train"));
  double grad_diff = 0.0, buffer_diff = 0.0;
  std::string worst_grad;
  for (const auto& e : m.state()) {
    CAPTURE(e.name);
    const at::Tensor& t = tensor_of(e.handle);
    if (e.is_buffer) {
      if (!t.is_floating_point()) {
        CHECK(at::equal(t, io.at("after." + e.name)));
        continue;
      }
      buffer_diff = std::max(buffer_diff, relative_difference(t, io.at("after." + e.name)));
      continue;
    }
    REQUIRE(t.grad().defined());
    const double d = relative_difference(t.grad(), io.at("grad." + e.name));
    if (d > grad_diff) grad_diff = d, worst_grad = e.name;
  }
  MESSAGE(std::string(name) << " vs timm (drop_path_rate " << kDropPathRate << ", "
                            << io.at("dropped").sum().item<int64_t>()
                            << " branches of a sample dropped over all blocks): relative difference: eval logits " << eval_diff
               << ", train logits " << train_diff << ", gradients max " << grad_diff << " (" << worst_grad
               << "), BatchNorm statistics max " << buffer_diff);
  CHECK(io.at("dropped").sum().item<int64_t>() > 0);
  CHECK(eval_diff <= tolerance);
  CHECK(train_diff <= tolerance);
  CHECK(grad_diff <= tolerance);
  CHECK(buffer_diff <= tolerance);
}

TEST_SUITE("timm_drop_path_oracle" * doctest::skip()) {
  TEST_CASE("resnet drop_path_rate: every block's rate is timm's, exactly") {
    std::ifstream lines(fixture_dir() / "rates.txt");
    REQUIRE(lines.good());
    size_t checked = 0;
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      int64_t depth = 0;
      std::string rate_text;
      fields >> depth >> rate_text;
      std::vector<double> timm;
      for (std::string r; fields >> r;) timm.push_back(std::strtod(r.c_str(), nullptr));
      tp::resnet::ResNetOptions options;
      options.depth = depth;
      options.drop_path_rate = std::strtod(rate_text.c_str(), nullptr);
      CAPTURE(line);
      CHECK(tp::resnet::ResNet(options).drop_path_rates() == timm);  // exact: the same double arithmetic
      ++checked;
    }
    CHECK(checked == 6);
  }
  TEST_CASE("resnet18 with drop_path_rate 0.5 against timm: logits, gradients, statistics") {
    check_case("resnet18", 18, false);
  }
  TEST_CASE("resnet50 with drop_path_rate 0.5 against timm: logits, gradients, statistics") {
    check_case("resnet50", 50, false);
  }
  TEST_CASE("resnet18 with drop_path_rate 0.5 under CPU bfloat16 autocast against timm's") {
    check_case("resnet18_bf16", 18, true);
  }
}

}  // namespace
