// org.torchhost.resnet through its C ABI against torchvision's architecture, which
// resnet_reference.py rewrites with plain torch.nn (torchvision itself does not import beside the
// venv's torch): parameter counts, state names and shapes, the forward of a torchvision-style
// state_dict loaded by name (train.init_weights itself: zoo_host_tests), initialisation,
// zero_init_residual, activation checkpointing (bit-identical outputs, gradients and BatchNorm
// statistics), and fused_norm with tp::cpp::batch_norm_relu, which on the CPU is the module path.
// Inputs are small (64x64 or 32x32, batch 2): ResNet-50 at 224 is slow on two CPU cores.
#include "plugins/models/zoo_model.h"

#include <torch/nn/modules/batchnorm.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "tp/cpp/fused_norm.h"

namespace {

using namespace tp::test;
using Config = std::map<std::string, FakeConfig::Value>;

constexpr const char* kResnetLibrary = "resnet";
constexpr const char* kResnetId = "org.torchhost.resnet";
const char* const kScript = "tests/plugins/models/resnet_reference.py";

Config resnet_config(int64_t depth, int64_t classes = 1000, int64_t channels = 3, bool zero_init = false,
                     bool fused_norm = true) {
  return {{"depth", depth},           {"num_classes", classes},     {"in_channels", channels},
          {"zero_init_residual", zero_init}, {"fused_norm", fused_norm}, {"input", std::string("image")},
          {"drop_path_rate", 0.0}};
}

/// "<shape>" as resnet_reference.py prints it: "64,3,7,7", "-" for a scalar.
std::string shape_key(at::IntArrayRef sizes) {
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? "," : "") + std::to_string(sizes[i]);
  return out.empty() ? "-" : out;
}

TEST_CASE("resnet: parameter counts are torchvision's") {
  const std::pair<int64_t, int64_t> expected[] = {{18, 11'689'512}, {34, 21'797'672}, {50, 25'557'032}};
  for (const auto& [depth, count] : expected) {
    CAPTURE(depth);
    ZooModel m(kResnetLibrary, kResnetId, resnet_config(depth));
    CHECK(m.parameter_count() == count);
  }
}

TEST_CASE("resnet: state names, shapes and kinds equal the torch.nn reference's state_dict") {
  // "<depth> <classes> <channels>" -> name -> "<shape> <p|b>"
  std::map<std::string, std::map<std::string, std::string>> reference;
  std::map<std::string, int64_t> counts;
  std::istringstream lines(run_python(kScript, "keys"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string a, b, c, d, e, g;
    f >> a >> b >> c >> d;
    if (a == "count") {
      counts[b + " " + c + " " + d] = std::stoll((f >> e, e));
      continue;
    }
    f >> e >> g;
    if (!g.empty()) reference[a + " " + b + " " + c][d] = e + " " + g;
  }
  REQUIRE(reference.size() == 5);
  for (const auto& [key, entries] : reference) {
    CAPTURE(key);
    int64_t depth = 0, classes = 0, channels = 0;
    std::istringstream(key) >> depth >> classes >> channels;
    ZooModel m(kResnetLibrary, kResnetId, resnet_config(depth, classes, channels));
    std::map<std::string, std::string> ours;
    for (const auto& e : m.state())
      ours[e.name] = shape_key(tensor_of(e.handle).sizes()) + (e.is_buffer ? " b" : " p");
    CHECK(ours.size() == entries.size());
    for (const auto& [name, what] : entries) {
      CAPTURE(name);
      CHECK(ours.count(name) == 1);
      if (ours.count(name) == 1) CHECK(ours.at(name) == what);
    }
    CHECK(m.parameter_count() == counts.at(key));
  }
}

TEST_CASE("resnet: a torchvision-style state_dict loads by name and gives the reference's logits") {
  const auto dir = fresh_dir("zoo_resnet_weights");
  run_python(kScript, "weights '" + dir.string() + "'");
  for (int64_t depth : {18, 50}) {
    CAPTURE(depth);
    const std::string stem = "resnet" + std::to_string(depth);
    ZooModel m(kResnetLibrary, kResnetId, resnet_config(depth, 10));
    // Strict by name and shape, like train.init_weights (zoo_host_tests runs that path itself).
    load_weights(m, load_python_dict(dir / (stem + "_weights.pt")));
    const auto io = load_python_dict(dir / (stem + "_io.pt"));
    Fields in = {{"image", io.at("x")}};

    // Same LibTorch on both sides (the venv's), so differences are summation order at most.
    m.train(false);
    const double eval_diff = relative_difference(m.forward(in).at("logits").detach(), io.at("eval"));
    m.train(true);
    const double train_diff = relative_difference(m.forward(in).at("logits").detach(), io.at("train"));
    MESSAGE("resnet" << depth << " vs reference: eval " << eval_diff << ", train " << train_diff);
    CHECK(eval_diff <= 1e-5);
    CHECK(train_diff <= 1e-5);
    // The training-mode forward moved the running statistics as PyTorch's did.
    for (const auto& e : m.state()) {
      if (!e.is_buffer) continue;
      CAPTURE(e.name);
      const at::Tensor& ours = tensor_of(e.handle);
      if (ours.is_floating_point()) CHECK(relative_difference(ours, io.at("after." + e.name)) <= 1e-5);
      else CHECK(at::equal(ours, io.at("after." + e.name)));
    }
  }
}

TEST_CASE("resnet: forward shapes, in_channels, input dtype and a wrong image") {
  ZooModel m(kResnetLibrary, kResnetId, resnet_config(18, 5, 1));
  m.train(false);
  Fields in = {{"image", at::randn({2, 1, 64, 48})}};
  CHECK(m.forward(in).at("logits").sizes() == at::IntArrayRef({2, 5}));
  REQUIRE(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
  CHECK((m.forward(in).at("logits").scalar_type() == at::kDouble));  // float32 batch cast to the model
  CHECK((m.named("bn1.num_batches_tracked").scalar_type() == at::kLong));

  std::map<std::string, at::Tensor> out;
  Fields rgb = {{"image", at::randn({2, 3, 64, 64})}};
  CHECK(m.try_forward(rgb, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("in_channels = 1") != std::string::npos);
  CHECK(m.error().find("[2, 3, 64, 64]") != std::string::npos);
  Fields other = {{"pixels", at::randn({2, 1, 64, 64})}};
  CHECK(m.try_forward(other, out) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.error().find("'image'") != std::string::npos);

  ZooModel bad(kResnetLibrary, kResnetId, resnet_config(20), 1, /*expect_ok=*/false);
  CHECK(bad.status == TP_ERR_CONFIG);
  CHECK(bad.error().find("depth must be 18, 34 or 50") != std::string::npos);
}

TEST_CASE("resnet: torchvision's initialisation") {
  ZooModel m(kResnetLibrary, kResnetId, resnet_config(18));
  // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / (out_channels * k * k)).
  const at::Tensor w = m.named("layer3.0.conv2.weight");  // [256, 256, 3, 3], 589,824 draws
  CHECK(w.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (256 * 9))).epsilon(0.01));
  CHECK(m.named("conv1.weight").std().item<double>() == doctest::Approx(std::sqrt(2.0 / (64 * 49))).epsilon(0.03));
  for (const auto& e : m.state()) {
    const bool bn = e.name.find("bn") != std::string::npos || e.name.find("downsample.1") != std::string::npos;
    if (!bn || e.is_buffer) continue;
    CAPTURE(e.name);
    const bool weight = e.name.size() > 7 && e.name.compare(e.name.size() - 7, 7, ".weight") == 0;
    CHECK(at::equal(tensor_of(e.handle), at::full_like(tensor_of(e.handle), weight ? 1.0 : 0.0)));
  }
  // fc keeps nn.Linear's default: U(-1/sqrt(512), 1/sqrt(512)).
  CHECK(m.named("fc.weight").abs().max().item<double>() <= 1.0 / std::sqrt(512.0));
}

TEST_CASE("resnet: zero_init_residual starts every block as the identity") {
  for (int64_t depth : {18, 50}) {
    CAPTURE(depth);
    const std::string last = depth == 18 ? "bn2" : "bn3";
    ZooModel zero(kResnetLibrary, kResnetId, resnet_config(depth, 10, 3, true));
    ZooModel plain(kResnetLibrary, kResnetId, resnet_config(depth, 10, 3, false));
    CHECK(at::equal(zero.named("layer2.1." + last + ".weight"), at::zeros({depth == 18 ? 128 : 512})));
    CHECK(at::equal(zero.named("layer4.0." + last + ".weight"), at::zeros({depth == 18 ? 512 : 2048})));
    CHECK(at::equal(zero.named("layer1.0.bn1.weight"), at::ones({64})));
    CHECK(at::equal(plain.named("layer2.1." + last + ".weight"), at::ones({depth == 18 ? 128 : 512})));

    // Effect: a block's residual branch is multiplied by 0, so its convolutions do not reach the
    // logits (identity and downsample blocks alike); without the option they do.
    at::manual_seed(5);
    Fields in = {{"image", at::randn({2, 3, 32, 32})}};
    for (ZooModel* m : {&zero, &plain}) {
      m->train(false);
      const at::Tensor before = m->forward(in).at("logits").detach();
      {
        at::NoGradGuard no_grad;
        for (const char* conv : {"layer1.0.conv1.weight", "layer2.0.conv2.weight", "layer3.1.conv1.weight"})
          m->named(conv).add_(at::randn_like(m->named(conv)));
      }
      const bool unchanged = at::equal(before, m->forward(in).at("logits").detach());
      CHECK(unchanged == (m == &zero));
    }
  }
}

TEST_CASE("resnet: activation checkpointing gives bit-identical outputs, gradients and statistics") {
  // 32x32 inputs (layer4 runs at 1x1): ResNet-18 (stem and eight BasicBlocks, three with
  // downsample), ResNet-50 (sixteen Bottlenecks, four with downsample).
  const std::pair<int64_t, int64_t> cases[] = {{18, 32}, {50, 32}};
  for (const auto& [depth, size] : cases) {
    CAPTURE(depth);
    const auto off = checkpointing_step(kResnetLibrary, kResnetId, resnet_config(depth, 10), false, size);
    const auto on = checkpointing_step(kResnetLibrary, kResnetId, resnet_config(depth, 10), true, size);
    REQUIRE(on.size() == off.size());
    size_t different = 0;
    for (size_t i = 0; i < on.size(); ++i) different += at::equal(on[i], off[i]) ? 0 : 1;
    CHECK(different == 0);
  }
  // Eval mode never checkpoints.
  ZooModel m(kResnetLibrary, kResnetId, resnet_config(18, 10));
  REQUIRE(m.t->set_activation_checkpointing(m.self, true) == TP_OK);
  m.train(false);
  Fields in = {{"image", at::randn({1, 3, 32, 32})}};
  CHECK_FALSE(has_checkpoint_node(m.forward(in).at("logits")));
}

TEST_CASE("tp::cpp::batch_norm_relu on the CPU is the module path bit for bit: output, gradients, statistics") {
  // The fused ops are CUDA only: on the CPU (and in eval) batch_norm_relu must be exactly
  // bn->forward(x), += residual, relu_(), side effects included.
  for (const bool training : {true, false}) {
    for (const bool with_residual : {false, true}) {
      CAPTURE(training);
      CAPTURE(with_residual);
      at::manual_seed(7);
      torch::nn::BatchNorm2d original(8);
      {
        torch::NoGradGuard no_grad;
        original->weight.uniform_(0.5, 1.5);
        original->bias.uniform_(-0.5, 0.5);
      }
      original->train(training);
      const at::Tensor x0 = (at::randn({4, 8, 5, 5}) * 2 + 1).contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor residual0 = with_residual ? at::randn({4, 8, 5, 5}) : at::Tensor();
      const at::Tensor dy = at::randn({4, 8, 5, 5});
      std::vector<at::Tensor> results[2];
      for (int path = 0; path < 2; ++path) {
        torch::nn::BatchNorm2d bn(std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(original->clone()));
        const at::Tensor x = x0.clone().requires_grad_(true);
        const at::Tensor residual = with_residual ? residual0.clone().requires_grad_(true) : at::Tensor();
        at::Tensor y;
        if (path == 0) {
          y = tp::cpp::batch_norm_relu(bn, x, residual);
        } else {
          y = bn->forward(x);
          if (with_residual) y += residual;
          y = y.relu_();
        }
        y.backward(dy);
        results[path] = {y.detach(), x.grad(), bn->weight.grad(), bn->bias.grad(), bn->running_mean,
                         bn->running_var, bn->num_batches_tracked};
        if (with_residual) results[path].push_back(residual.grad());
      }
      for (size_t i = 0; i < results[0].size(); ++i) {
        CAPTURE(i);
        CHECK(at::equal(results[0][i], results[1][i]));
      }
    }
  }
}

TEST_CASE("resnet: fused_norm = true and false build the same model and, on the CPU, compute the same bits") {
  at::manual_seed(21);
  ZooModel on(kResnetLibrary, kResnetId, resnet_config(18, 10, 3, false, true));
  at::manual_seed(21);
  ZooModel off(kResnetLibrary, kResnetId, resnet_config(18, 10, 3, false, false));
  at::manual_seed(22);
  const at::Tensor image = at::randn({2, 3, 32, 32}).contiguous(at::MemoryFormat::ChannelsLast);
  for (const bool training : {true, false}) {
    CAPTURE(training);
    on.train(training);
    off.train(training);
    Fields in_on = {{"image", image}};
    Fields in_off = {{"image", image}};
    CHECK(at::equal(on.forward(in_on).at("logits"), off.forward(in_off).at("logits")));
  }
  for (const char* name : {"conv1.weight", "layer1.0.bn1.running_mean", "layer4.1.bn2.running_var",
                           "layer2.0.downsample.1.num_batches_tracked"})
    CHECK_MESSAGE(at::equal(on.named(name), off.named(name)), name);
}

}  // namespace
