// vision_models through the C ABI: output names and shapes, parameter counts, state aliasing,
// gradients, dtype changes and error reporting.
#include "support/plugin_harness.h"

namespace {

using namespace tp::test;

constexpr const char* kMlp = "org.torchhost.mlp";
constexpr const char* kSmallCnn = "org.torchhost.small_cnn";
constexpr const char* kMultiHead = "org.torchhost.multi_head_cnn";
constexpr const char* kTwoStream = "org.torchhost.two_stream";
constexpr const char* kDeepCnn = "org.torchhost.deep_cnn";

/// A model instance created with the descriptor's defaults plus `overrides`; destroyed at scope end.
struct Model {
  LoadedPlugin& p = plugin("vision_models");
  const tp_model_v1_t* t = nullptr;
  void* self = nullptr;

  explicit Model(const char* id, std::map<std::string, FakeConfig::Value> overrides = {}) {
    t = &p.table<tp_model_v1_t>(id, TP_IFACE_MODEL_V1);
    FakeConfig cfg;
    fill_defaults(cfg, p.descriptor(id));
    for (auto& [k, v] : overrides) cfg.values[k] = v;
    REQUIRE_MESSAGE(t->create(&p.host.host, &cfg.view, &self) == TP_OK, p.host.last_error);
  }
  ~Model() { t->destroy(self); }

  /// Runs forward; returns the outputs by name (new references adopted).
  std::map<std::string, at::Tensor> forward(Fields& inputs) {
    tp_named_tensor_t out[4];
    uint32_t n = 0;
    REQUIRE_MESSAGE(t->forward(self, inputs.view(), inputs.size(), out, 4, &n) == TP_OK, p.host.last_error);
    std::map<std::string, at::Tensor> result;
    for (uint32_t i = 0; i < n; ++i) result[out[i].name] = adopt(p, out[i].tensor);
    return result;
  }
  std::vector<StateEntry> state() { return visit_all(t->visit_state, self); }
};

Fields batch(int64_t b = 4) {
  return {{"image", at::randn({b, 3, 32, 32})}, {"image2", at::randn({b, 3, 32, 32})},
          {"label", at::randint(0, 3, {b}, at::kLong)}, {"bbox", at::rand({b, 4})}};
}

int64_t parameter_count(const std::vector<StateEntry>& state) {
  int64_t n = 0;
  for (const auto& e : state) n += e.is_buffer ? 0 : tensor_of(e.handle).numel();
  return n;
}

TEST_CASE("vision_models declares five models with examples") {
  LoadedPlugin& p = plugin("vision_models");
  REQUIRE(p.entry->descriptor_count() == 5);
  for (const char* id : {kMlp, kSmallCnn, kMultiHead, kTwoStream, kDeepCnn}) {
    const tp_descriptor_t& d = p.descriptor(id);
    CHECK(d.kind == TP_KIND_MODEL);
    CHECK(d.tier == TP_TIER_T);
    REQUIRE(d.example_count >= 2);
    CHECK(std::string(d.examples[0].name) == "image");
    CHECK(d.examples[0].ndim == 3);
    CHECK(d.examples[0].shape[0] == 3);
  }
  CHECK(std::string(p.entry->build->torch_version) == TORCH_VERSION);
}

TEST_CASE("each model's outputs for a batch of 4") {
  at::manual_seed(0);
  Fields in = batch();
  {
    auto out = Model(kMlp).forward(in);
    REQUIRE(out.size() == 1);
    CHECK(out["logits"].sizes() == at::IntArrayRef({4, 3}));
  }
  {
    auto out = Model(kSmallCnn).forward(in);
    REQUIRE(out.size() == 1);
    CHECK(out["logits"].sizes() == at::IntArrayRef({4, 3}));
  }
  for (const char* id : {kMultiHead, kTwoStream}) {
    auto out = Model(id).forward(in);
    REQUIRE(out.size() == 2);
    CHECK(out["logits"].sizes() == at::IntArrayRef({4, 3}));
    CHECK(out["bbox"].sizes() == at::IntArrayRef({4, 4}));
    CHECK(out["bbox"].min().item<double>() > 0.0);  // sigmoid: normalised coordinates
    CHECK(out["bbox"].max().item<double>() < 1.0);
  }
  auto wide = Model(kSmallCnn, {{"num_classes", int64_t{10}}}).forward(in);
  CHECK(wide["logits"].sizes() == at::IntArrayRef({4, 10}));
}

TEST_CASE("parameter counts") {
  // mlp: 3072->256->128->3 with biases.
  const int64_t mlp = 3072 * 256 + 256 + 256 * 128 + 128 + 128 * 3 + 3;  // 819,971
  CHECK(parameter_count(Model(kMlp).state()) == mlp);
  CHECK(parameter_count(Model(kMlp, {{"hidden", std::vector<int64_t>{}}}).state()) == 3072 * 3 + 3);
  // Trunk (width 32, 3 input channels): conv weights 9*(3*32 + 32*64 + 64*64) = 56,160, no conv
  // bias; BatchNorm gamma+beta 2*(32+64+64) = 320. Feature map 64 x 4 x 4.
  const int64_t trunk = 9 * (3 * 32 + 32 * 64 + 64 * 64) + 2 * (32 + 64 + 64);  // 56,480
  CHECK(parameter_count(Model(kSmallCnn).state()) == trunk + 64 * 3 + 3);                     // 56,675
  CHECK(parameter_count(Model(kMultiHead).state()) == trunk + 64 * 3 + 3 + 64 * 16 * 4 + 4);  // 60,775
  CHECK(parameter_count(Model(kTwoStream).state()) == 2 * trunk + 128 * 3 + 3 + 128 * 16 * 4 + 4);  // 121,543
}

TEST_CASE("visit_state: names, order, buffers") {
  Model m(kSmallCnn);
  const auto first = m.state();
  std::vector<std::string> params, buffers;
  for (const auto& e : first) (e.is_buffer ? buffers : params).push_back(e.name);
  CHECK(params == std::vector<std::string>{"trunk.conv1.weight", "trunk.bn1.weight", "trunk.bn1.bias",
                                           "trunk.conv2.weight", "trunk.bn2.weight", "trunk.bn2.bias",
                                           "trunk.conv3.weight", "trunk.bn3.weight", "trunk.bn3.bias",
                                           "head.weight", "head.bias"});
  CHECK(buffers.size() == 9);
  CHECK(buffers[2] == "trunk.bn1.num_batches_tracked");
  CHECK((tensor_of(first[11 + 2].handle).scalar_type() == at::kLong));
  // Parameters come before buffers, and a second visit is identical.
  CHECK_FALSE(first[10].is_buffer);
  CHECK(first[11].is_buffer);
  const auto second = m.state();
  REQUIRE(second.size() == first.size());
  for (size_t i = 0; i < first.size(); ++i) CHECK(second[i].name == first[i].name);
}

TEST_CASE("visit_state handles alias the model's tensors") {
  at::manual_seed(1);
  Fields in = batch();
  for (const char* id : {kMlp, kSmallCnn}) {
    Model m(id);
    REQUIRE(m.t->set_training(m.self, false) == TP_OK);
    const at::Tensor before = m.forward(in)["logits"].detach();
    for (const auto& e : m.state()) {
      if (e.name != "head.bias") continue;
      at::NoGradGuard no_grad;  // an in-place update of a leaf, as the optimizer does
      tensor_of(e.handle).add_(1.0);
    }
    const at::Tensor after = m.forward(in)["logits"].detach();
    CHECK(at::allclose(after, before + 1.0, 1e-5, 1e-5));
  }
  // Batch-norm statistics are buffers the model updates itself in training mode.
  Model cnn(kSmallCnn);
  REQUIRE(cnn.t->set_training(cnn.self, true) == TP_OK);
  cnn.forward(in);
  for (const auto& e : cnn.state())
    if (e.name == "trunk.bn1.num_batches_tracked") CHECK(tensor_of(e.handle).item<int64_t>() == 1);
}

TEST_CASE("forward + backward reaches every parameter") {
  at::manual_seed(2);
  Fields in = batch();
  for (const char* id : {kMlp, kSmallCnn, kMultiHead, kTwoStream}) {
    Model m(id);
    REQUIRE(m.t->set_training(m.self, true) == TP_OK);
    at::Tensor loss = at::zeros({});
    for (auto& [name, out] : m.forward(in)) loss = loss + (out * at::randn_like(out)).sum();
    loss.backward();
    for (const auto& e : m.state()) {
      if (e.is_buffer) continue;
      const at::Tensor grad = tensor_of(e.handle).grad();
      INFO(id << " " << e.name);
      REQUIRE(grad.defined());
      CHECK(grad.isfinite().all().item<bool>());
      CHECK(grad.abs().sum().item<double>() > 0.0);
    }
  }
}

TEST_CASE("to_device(cpu, float64) converts floating state only") {
  at::manual_seed(3);
  Fields in = batch();
  Model m(kMultiHead);
  REQUIRE(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
  for (const auto& e : m.state()) {
    INFO(e.name);
    const bool counter = e.name.find("num_batches_tracked") != std::string::npos;
    CHECK((tensor_of(e.handle).scalar_type() == (counter ? at::kLong : at::kDouble)));
  }
  auto out = m.forward(in);  // float32 images are cast to the model's dtype
  CHECK((out["logits"].scalar_type() == at::kDouble));
  CHECK((out["bbox"].scalar_type() == at::kDouble));
  CHECK(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_INT64) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("errors name the missing or bad field") {
  LoadedPlugin& p = plugin("vision_models");
  Fields wrong{{"img", at::randn({4, 3, 32, 32})}};
  tp_named_tensor_t out[4];
  uint32_t n = 7;
  {
    Model m(kSmallCnn);
    CHECK(m.t->forward(m.self, wrong.view(), wrong.size(), out, 4, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(n == 0);
    CHECK(p.host.last_error.find("'image'") != std::string::npos);
    CHECK(p.host.last_error.find("img") != std::string::npos);  // lists what is present
  }
  {
    Model m(kTwoStream);
    Fields one{{"image", at::randn({4, 3, 32, 32})}};
    CHECK(m.t->forward(m.self, one.view(), one.size(), out, 4, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(p.host.last_error.find("'image2'") != std::string::npos);
    Fields both = batch();
    CHECK(m.t->forward(m.self, both.view(), both.size(), out, 1, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(p.host.last_error.find("capacity") != std::string::npos);
  }
  {
    Model m(kMlp);
    Fields small{{"image", at::randn({4, 1, 28, 28})}};
    CHECK(m.t->forward(m.self, small.view(), small.size(), out, 4, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(p.host.last_error.find("3072") != std::string::npos);
  }
  const tp_model_v1_t& t = p.table<tp_model_v1_t>(kSmallCnn, TP_IFACE_MODEL_V1);
  FakeConfig cfg;
  fill_defaults(cfg, p.descriptor(kSmallCnn));
  cfg.values["image_size"] = int64_t{30};
  void* self = reinterpret_cast<void*>(1);
  CHECK(t.create(&p.host.host, &cfg.view, &self) == TP_ERR_CONFIG);
  CHECK(self == nullptr);
  CHECK(p.host.last_error.find("image_size") != std::string::npos);
  t.destroy(nullptr);  // accepted
}

}  // namespace
