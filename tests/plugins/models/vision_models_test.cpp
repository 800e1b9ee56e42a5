// vision_models through the C ABI with activation checkpointing: every model exposes the 1.1
// entry; a training step with it on gives the outputs, gradients and BatchNorm statistics of a
// step with it off (deep_cnn above all, the model the memory benchmark uses); eval is untouched.
#include "support/autograd_graph.h"  // before the harness: it brings doctest
#include "support/plugin_harness.h"

namespace {

using namespace tp::test;

constexpr const char* kDeepCnn = "org.torchhost.deep_cnn";

/// A model created with the descriptor's defaults plus `overrides`, after at::manual_seed(seed),
/// so two instances with the same seed start identical.
struct Model {
  LoadedPlugin& p = plugin("vision_models");
  const tp_model_v1_t* t = nullptr;
  void* self = nullptr;

  Model(const char* id, std::map<std::string, FakeConfig::Value> overrides = {}, uint64_t seed = 1) {
    t = &p.table<tp_model_v1_t>(id, TP_IFACE_MODEL_V1);
    FakeConfig cfg;
    fill_defaults(cfg, p.descriptor(id));
    for (auto& [k, v] : overrides) cfg.values[k] = v;
    at::manual_seed(seed);
    REQUIRE_MESSAGE(t->create(&p.host.host, &cfg.view, &self) == TP_OK, p.host.last_error);
  }
  ~Model() { t->destroy(self); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

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

/// One training step of `id` (forward, a loss over every output, backward) with checkpointing
/// `on` or off. Returns every output, then every parameter's gradient, then every buffer.
std::vector<at::Tensor> train_step(const char* id, bool on, std::map<std::string, FakeConfig::Value> overrides = {}) {
  Model m(id, overrides);
  if (on) REQUIRE_MESSAGE(m.t->set_activation_checkpointing(m.self, true) == TP_OK, m.p.host.last_error);
  REQUIRE(m.t->set_training(m.self, true) == TP_OK);
  at::manual_seed(42);  // the batch, then dropout masks: the same draws in both runs
  Fields in = {{"image", at::randn({6, 3, 32, 32})}, {"image2", at::randn({6, 3, 32, 32})},
               {"label", at::randint(0, 3, {6}, at::kLong)}, {"bbox", at::rand({6, 4})}};
  auto out = m.forward(in);
  CHECK_MESSAGE(has_checkpoint_node(out.at("logits")) == on, id);
  at::Tensor loss = at::cross_entropy_loss(out.at("logits"), in.items[2].second);
  if (out.count("bbox")) loss = loss + (out.at("bbox") - in.items[3].second).pow(2).mean();
  loss.backward();
  std::vector<at::Tensor> result;
  for (auto& [name, t] : out) result.push_back(t.detach());
  for (const auto& e : m.state()) {
    const at::Tensor& t = tensor_of(e.handle);
    if (!e.is_buffer) {
      REQUIRE_MESSAGE(t.grad().defined(), e.name);
      result.push_back(t.grad().clone());
    } else {
      result.push_back(t.to(at::kDouble));  // running_mean/var, num_batches_tracked
    }
  }
  return result;
}

/// Largest absolute difference over two equally long tensor lists.
double max_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

TEST_CASE("every vision model has the 1.1 entry") {
  LoadedPlugin& p = plugin("vision_models");
  for (uint32_t i = 0; i < p.entry->descriptor_count(); ++i) {
    const char* id = p.entry->descriptor_at(i)->id;
    const auto& t = p.table<tp_model_v1_t>(id, TP_IFACE_MODEL_V1);
    CAPTURE(id);
    CHECK(t.struct_size == sizeof(tp_model_v1_t));
    CHECK((t.set_activation_checkpointing != nullptr));
  }
}

TEST_CASE("deep_cnn: gradients with checkpointing equal gradients without") {
  for (bool residual : {true, false}) {
    CAPTURE(residual);
    const std::map<std::string, FakeConfig::Value> cfg = {
        {"depth", int64_t{4}}, {"width", int64_t{8}}, {"residual", residual}};
    const auto off = train_step(kDeepCnn, false, cfg);
    const auto on = train_step(kDeepCnn, true, cfg);
    CHECK(max_diff(on, off) <= 1e-6);
  }
}

TEST_CASE("the trunk CNNs and the mlp with dropout: gradients with checkpointing equal gradients without") {
  const std::vector<std::pair<const char*, std::map<std::string, FakeConfig::Value>>> cases = {
      {"org.torchhost.small_cnn", {{"width", int64_t{8}}}},
      {"org.torchhost.multi_head_cnn", {{"width", int64_t{8}}}},  // two outputs, both in the loss
      {"org.torchhost.two_stream", {{"width", int64_t{8}}}},      // two inputs, two trunks
      {"org.torchhost.mlp", {{"hidden", std::vector<int64_t>{64, 32}}, {"dropout", 0.5}}},
  };
  for (const auto& [id, cfg] : cases) {
    CAPTURE(id);
    CHECK(max_diff(train_step(id, true, cfg), train_step(id, false, cfg)) <= 1e-6);
  }
}

TEST_CASE("deep_cnn: defaults, state names, outputs") {
  Model m(kDeepCnn);
  std::vector<std::string> names;
  int64_t parameters = 0;
  for (const auto& e : m.state()) {
    names.push_back(e.name);
    if (!e.is_buffer) parameters += tensor_of(e.handle).numel();
  }
  // stem conv 3->32 (no bias) + BN; 8 blocks conv 32->32 + BN; head 32->3.
  CHECK(parameters == 9 * 3 * 32 + 64 + 8 * (9 * 32 * 32 + 64) + 32 * 3 + 3);  // 75,267
  CHECK(names.front() == "stem.conv.weight");
  CHECK(std::count(names.begin(), names.end(), "blocks.7.bn.running_var") == 1);
  CHECK(names.back() == "blocks.7.bn.num_batches_tracked");
  at::manual_seed(0);
  Fields in = {{"image", at::randn({2, 3, 32, 32})}};
  CHECK(m.forward(in).at("logits").sizes() == at::IntArrayRef({2, 3}));
}

TEST_CASE("eval mode and no-grad forward are untouched by the switch") {
  const std::map<std::string, FakeConfig::Value> cfg = {{"depth", int64_t{2}}, {"width", int64_t{8}}};
  Model on(kDeepCnn, cfg), off(kDeepCnn, cfg);
  REQUIRE(on.t->set_activation_checkpointing(on.self, true) == TP_OK);
  at::manual_seed(3);
  Fields in = {{"image", at::randn({2, 3, 32, 32})}};
  for (Model* m : {&on, &off}) REQUIRE(m->t->set_training(m->self, false) == TP_OK);
  const at::Tensor a = on.forward(in).at("logits");
  CHECK_FALSE(has_checkpoint_node(a));
  CHECK(at::equal(a, off.forward(in).at("logits")));
  REQUIRE(on.t->set_training(on.self, true) == TP_OK);
  at::NoGradGuard no_grad;
  CHECK_FALSE(on.forward(in).at("logits").requires_grad());
}

TEST_CASE("switching off again restores plain autograd; mlp without hidden layers refuses") {
  Model m(kDeepCnn, {{"depth", int64_t{1}}, {"width", int64_t{4}}});
  REQUIRE(m.t->set_training(m.self, true) == TP_OK);
  Fields in = {{"image", at::randn({2, 3, 32, 32})}};
  REQUIRE(m.t->set_activation_checkpointing(m.self, true) == TP_OK);
  CHECK(has_checkpoint_node(m.forward(in).at("logits")));
  REQUIRE(m.t->set_activation_checkpointing(m.self, false) == TP_OK);
  CHECK_FALSE(has_checkpoint_node(m.forward(in).at("logits")));

  Model linear("org.torchhost.mlp", {{"hidden", std::vector<int64_t>{}}});
  CHECK(linear.t->set_activation_checkpointing(linear.self, true) == TP_ERR_UNSUPPORTED);
  CHECK(linear.p.host.last_error.find("hidden = []") != std::string::npos);
  CHECK(linear.t->set_activation_checkpointing(linear.self, false) == TP_OK);
}

}  // namespace
