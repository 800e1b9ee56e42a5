// tp/cpp/model_adapter.h on its own: the tp.model/1 tables it generates from C++ classes, called
// directly (no library) with a FakeHost. A throwing class yields a status and the host's message,
// never an exception; a failing forward hands over no output and leaks none (the model keeps a
// reference to what it made, so a leaked handle shows as a second reference); destroy(NULL) is a
// no-op; the state lent by visit_state aliases the module and follows to_device; the optional
// entries exist only for a class that declares them.
#include "tp/cpp/model_adapter.h"  // before the harness: c10's CHECK is replaced by doctest's there

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/plugin_harness.h"

namespace {

using tp::test::FakeConfig;
using tp::test::FakeHost;

/// y = x * w, with a parameter `w` [2] and an int64 buffer `calls`. `mode` (config) picks a way
/// to fail; every tensor forward makes is kept in made_, so a test can count its references.
class Scale : public torch::nn::Module {
 public:
  explicit Scale(const tp::cpp::ConfigReader& cfg) : mode_(cfg.get_int("mode")) {
    if (mode_ == 1) throw tp::cpp::Failure(TP_ERR_CONFIG, "scale: mode 1 refuses the config");
    TORCH_CHECK(mode_ != 2, "scale: a c10::Error from the constructor");
    w_ = register_parameter("w", at::ones({2}));
    calls_ = register_buffer("calls", at::zeros({}, at::kLong));
  }

  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) {
    const at::Tensor& x = inputs.get("x");
    made_ = {x * w_, x + w_};
    switch (mode_) {
      case 3: return {{"y", made_[0]}, {"z", made_[1]}};      // more than a capacity of 1
      case 4: return {{"y", made_[0]}, {nullptr, made_[1]}};  // an output without a name
      case 5: throw std::runtime_error("scale: failed after computing y");
      default: return {{"y", made_[0]}};
    }
  }

  void set_dtype(at::ScalarType dtype) { dtype_ = dtype; }

  at::ScalarType dtype_ = at::kFloat;
  std::vector<at::Tensor> made_;

 private:
  int64_t mode_;
  at::Tensor w_, calls_;
};

/// Scale with the activation-checkpointing switch, which refuses to turn on.
class Switchable : public Scale {
 public:
  using Scale::Scale;
  void set_activation_checkpointing(bool enabled) {
    if (enabled) throw tp::cpp::Failure(TP_ERR_UNSUPPORTED, "switchable: nothing to checkpoint");
  }
};

/// Linear(2, 3) - BatchNorm1d(3), declaring both at depth 0 and 1 (ABI 1.4's layer_depths).
class Normed : public torch::nn::Module {
 public:
  explicit Normed(const tp::cpp::ConfigReader&) {
    linear_ = register_module("lin", torch::nn::Linear(2, 3));
    norm_ = register_module("bn", torch::nn::BatchNorm1d(3));
  }
  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) { return {{"y", norm_->forward(linear_->forward(inputs.get("x")))}}; }
  std::vector<tp::cpp::LayerDepth> layer_depths() const { return {{"lin", 0}, {"bn", 1}}; }
  torch::nn::BatchNorm1d norm_{nullptr};

 private:
  torch::nn::Linear linear_{nullptr};
};

/// Scale declaring whether a CUDA graph can capture it (ABI 1.8): mode 0 can, mode 6 names its
/// reason, mode 7 fails to answer.
class Graphable : public Scale {
 public:
  explicit Graphable(const tp::cpp::ConfigReader& cfg) : Scale(cfg), mode_(cfg.get_int("mode")) {}
  std::string graph_capture_blocker() const {
    if (mode_ == 7) throw std::runtime_error("graphable: cannot tell");
    return mode_ == 6 ? "reads the number of boxes on the host" : "";
  }

 private:
  int64_t mode_;
};

/// The blocker declared without `const`: still detected, so its reason is never dropped.
class MutableBlocker : public Scale {
 public:
  using Scale::Scale;
  std::string graph_capture_blocker() { return "launches work on a CUDA stream of its own"; }
};

/// Not a module: the host trains the Linear it holds (state_root), under the Linear's own names.
class Holder {
 public:
  explicit Holder(const tp::cpp::ConfigReader&) : linear_(torch::nn::LinearOptions(3, 1)) {}
  tp::cpp::Outputs forward(const tp::cpp::Inputs& inputs) { return {{"y", linear_->forward(inputs.get("x"))}}; }
  torch::nn::Module& state_root() { return *linear_; }
  void train(bool on) { linear_->train(on); }

 private:
  torch::nn::Linear linear_;
};

/// A model with a teacher the host never sees (an unregistered Linear, as a torch::jit::Module
/// loaded from a file would be): its to_device hook moves the teacher and records what it was told
/// and the lent weight's dtype at that moment; its after_optimizer_step hook (ABI 1.14) records
/// the step and fails on a negative one.
class WithTeacher : public Scale {
 public:
  using Scale::Scale;
  void to_device(c10::Device device, at::ScalarType dtype) {
    told_ = {device, dtype};
    lent_dtype_when_told_ = named_parameters()["w"].scalar_type();
    teacher_->to(device, dtype);
  }
  void after_optimizer_step(int64_t step, int64_t total_steps) {
    if (step < 0) throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, "with_teacher: negative step");
    steps_.emplace_back(step, total_steps);
  }
  std::optional<std::pair<c10::Device, at::ScalarType>> told_;
  at::ScalarType lent_dtype_when_told_ = at::kFloat;
  torch::nn::Linear teacher_{2, 2};
  std::vector<std::pair<int64_t, int64_t>> steps_;
};

/// A factory standing in for the constructor (vision_models builds its components this way).
std::shared_ptr<Switchable> make_switchable(const tp::cpp::ConfigReader& cfg) { return std::make_shared<Switchable>(cfg); }

const tp_config_key_t kModelAdapterKeys[] = {{sizeof(tp_config_key_t), "mode", TP_CFG_INT, "0", "how it fails (0: never)"}};
const tp_example_input_t kModelAdapterExamples[] = {{sizeof(tp_example_input_t), "x", TP_DTYPE_FLOAT32, 1, {2}, 0}};
const tp_descriptor_t kScaleDescriptor =
    tp::cpp::model_descriptor("org.torchhost.test.scale", "1.0.0", "y = x * w", kModelAdapterKeys, kModelAdapterExamples);
const tp_descriptor_t kHolderDescriptor =
    tp::cpp::model_descriptor("org.torchhost.test.holder", "1.0.0", "a held Linear", kModelAdapterKeys);

const tp::cpp::Component kScale = tp::cpp::model_component<Scale, kScaleDescriptor>();
const tp::cpp::Component kSwitchable = tp::cpp::model_component<Switchable, kScaleDescriptor, &make_switchable>();
const tp::cpp::Component kHolder = tp::cpp::model_component<Holder, kHolderDescriptor>();
const tp::cpp::Component kNormed = tp::cpp::model_component<Normed, kHolderDescriptor>();
const tp::cpp::Component kGraphable = tp::cpp::model_component<Graphable, kScaleDescriptor>();
const tp::cpp::Component kMutableBlocker = tp::cpp::model_component<MutableBlocker, kScaleDescriptor>();
const tp::cpp::Component kWithTeacher = tp::cpp::model_component<WithTeacher, kScaleDescriptor>();

const tp_model_v1_t& model_adapter_table_of(const tp::cpp::Component& c) { return *static_cast<const tp_model_v1_t*>(c.table); }

/// An instance made through a table; destroyed at scope exit.
struct ModelAdapterInstance {
  FakeHost host;
  FakeConfig cfg;
  const tp_model_v1_t& t;
  void* self = nullptr;

  explicit ModelAdapterInstance(const tp::cpp::Component& c, int64_t mode = 0) : t(model_adapter_table_of(c)) { cfg.values = {{"mode", mode}}; }
  ~ModelAdapterInstance() { t.destroy(self); }
  tp_status create() { return t.create(&host.host, &cfg.view, &self); }
  Scale& scale() { return *static_cast<tp::cpp::detail::ModelInstance<Scale>*>(self)->model; }
  /// (name, is_buffer, tensor) of every visited entry.
  std::vector<std::tuple<std::string, bool, at::Tensor>> visit() {
    std::vector<std::tuple<std::string, bool, at::Tensor>> seen;
    const auto visitor = [](void* user, const char* name, tp_tensor h, bool is_buffer) -> tp_status {
      static_cast<decltype(seen)*>(user)->emplace_back(name, is_buffer, tp::test::tensor_of(h));
      return TP_OK;
    };
    REQUIRE(t.visit_state(self, visitor, &seen) == TP_OK);
    return seen;
  }
};

}  // namespace

TEST_CASE("model adapter: descriptor and table") {
  CHECK(kScaleDescriptor.struct_size == sizeof(tp_descriptor_t));
  CHECK(kScaleDescriptor.kind == TP_KIND_MODEL);
  CHECK(kScaleDescriptor.tier == TP_TIER_T);
  CHECK(kScaleDescriptor.example_count == 1);
  CHECK(kHolderDescriptor.examples == nullptr);
  const tp_model_v1_t& t = model_adapter_table_of(kScale);
  CHECK(t.struct_size == sizeof(tp_model_v1_t));
  CHECK(std::string(kScale.interface_id) == TP_IFACE_MODEL_V1);
  // The 1.1 entry exists only for a class that has the switch.
  CHECK((t.set_activation_checkpointing == nullptr));
  CHECK((model_adapter_table_of(kSwitchable).set_activation_checkpointing != nullptr));
  // 1.4: layer_depths only for a class that declares them; set_batchnorm_frozen for every class.
  CHECK((t.layer_depths == nullptr));
  CHECK((model_adapter_table_of(kNormed).layer_depths != nullptr));
  CHECK((t.set_batchnorm_frozen != nullptr));
  // 1.8: check_graph_capture only for a class that declares graph_capture_blocker(); NULL (capturable)
  // for the others.
  CHECK((t.check_graph_capture == nullptr));
  CHECK((model_adapter_table_of(kNormed).check_graph_capture == nullptr));
  CHECK((model_adapter_table_of(kGraphable).check_graph_capture != nullptr));
  CHECK((model_adapter_table_of(kMutableBlocker).check_graph_capture != nullptr));
  // 1.14: after_optimizer_step only for a class that declares it.
  CHECK((t.after_optimizer_step == nullptr));
  CHECK((model_adapter_table_of(kWithTeacher).after_optimizer_step != nullptr));
}

TEST_CASE("model adapter: to_device tells a class that declares it, after the lent state moved (a hidden teacher)") {
  ModelAdapterInstance m(kWithTeacher);
  REQUIRE(m.create() == TP_OK);
  auto& model = static_cast<WithTeacher&>(m.scale());
  CHECK_FALSE(model.told_.has_value());
  REQUIRE(m.t.to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
  REQUIRE(model.told_.has_value());
  CHECK(model.told_->first.type() == c10::kCPU);
  CHECK((model.told_->second == at::kDouble));
  CHECK((model.lent_dtype_when_told_ == at::kDouble));  // the adapter had moved the lent state first
  CHECK((model.teacher_->weight.scalar_type() == at::kDouble));  // the class moved what it hides
  CHECK((model.dtype_ == at::kDouble));                           // set_dtype is still told too
  const auto state = m.visit();
  CHECK(state.size() == 2);  // the teacher stays hidden: w and calls only
  REQUIRE(m.t.to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_BFLOAT16) == TP_OK);
  CHECK((model.told_->second == at::kBFloat16));
  CHECK((model.teacher_->weight.scalar_type() == at::kBFloat16));
}

TEST_CASE("model adapter: after_optimizer_step reaches the class; a throw is a status and the host's message") {
  ModelAdapterInstance m(kWithTeacher);
  REQUIRE(m.create() == TP_OK);
  auto& model = static_cast<WithTeacher&>(m.scale());
  CHECK(m.t.after_optimizer_step(m.self, 1, 12) == TP_OK);
  CHECK(m.t.after_optimizer_step(m.self, 2, 12) == TP_OK);
  CHECK(model.steps_ == std::vector<std::pair<int64_t, int64_t>>{{1, 12}, {2, 12}});
  CHECK(m.t.after_optimizer_step(m.self, -1, 12) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.host.last_error == "with_teacher: negative step");
  CHECK(m.t.after_optimizer_step(nullptr, 1, 12) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("model adapter: check_graph_capture answers the class's graph_capture_blocker()") {
  SUBCASE("\"\" is TP_OK") {
    ModelAdapterInstance m(kGraphable, 0);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.check_graph_capture(m.self) == TP_OK);
  }
  SUBCASE("a reason is TP_ERR_UNSUPPORTED with exactly that reason") {
    ModelAdapterInstance m(kGraphable, 6);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.check_graph_capture(m.self) == TP_ERR_UNSUPPORTED);
    CHECK(m.host.last_error == "reads the number of boxes on the host");
  }
  SUBCASE("a blocker that throws is an error, not an answer") {
    ModelAdapterInstance m(kGraphable, 7);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.check_graph_capture(m.self) == TP_ERR_INTERNAL);
    CHECK(m.host.last_error == "graphable: cannot tell");
  }
  SUBCASE("declared without const") {
    ModelAdapterInstance m(kMutableBlocker);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.check_graph_capture(m.self) == TP_ERR_UNSUPPORTED);
    CHECK(m.host.last_error == "launches work on a CUDA stream of its own");
  }
  CHECK(model_adapter_table_of(kGraphable).check_graph_capture(nullptr) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("model adapter: layer_depths hands out the class's ordering, valid until destroy") {
  ModelAdapterInstance m(kNormed);
  REQUIRE(m.create() == TP_OK);
  const tp_layer_depth_t* entries = nullptr;
  uint32_t count = 0;
  REQUIRE(m.t.layer_depths(m.self, &entries, &count) == TP_OK);
  REQUIRE(count == 2);
  CHECK(std::string(entries[0].prefix) == "lin");
  CHECK(entries[0].depth == 0);
  CHECK(std::string(entries[1].prefix) == "bn");
  CHECK(entries[1].depth == 1);
  CHECK(m.t.layer_depths(m.self, nullptr, &count) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("model adapter: set_batchnorm_frozen keeps BatchNorm in eval mode across set_training(true)") {
  ModelAdapterInstance m(kNormed);
  REQUIRE(m.create() == TP_OK);
  Normed& net = *static_cast<tp::cpp::detail::ModelInstance<Normed>*>(m.self)->model;
  REQUIRE(m.t.set_batchnorm_frozen(m.self, true) == TP_OK);
  REQUIRE(m.t.set_training(m.self, true) == TP_OK);
  CHECK(net.is_training());            // the model trains...
  CHECK_FALSE(net.norm_->is_training()); // ...its BatchNorm does not
  REQUIRE(m.t.set_batchnorm_frozen(m.self, false) == TP_OK);
  CHECK(net.norm_->is_training()); // follows the model again at once
  // A model without BatchNorm refuses, saying so; switching off is always fine.
  ModelAdapterInstance plain(kScale);
  REQUIRE(plain.create() == TP_OK);
  CHECK(plain.t.set_batchnorm_frozen(plain.self, true) == TP_ERR_UNSUPPORTED);
  CHECK(plain.host.last_error.find("has no BatchNorm layer") != std::string::npos);
  CHECK(plain.t.set_batchnorm_frozen(plain.self, false) == TP_OK);
}

TEST_CASE("model adapter: set_batchnorm_frozen_at keeps the named BatchNorm layers in eval mode, and only them") {
  ModelAdapterInstance m(kNormed);
  REQUIRE(m.create() == TP_OK);
  Normed& net = *static_cast<tp::cpp::detail::ModelInstance<Normed>*>(m.self)->model;
  const char* const bn[] = {"bn"};
  REQUIRE(m.t.set_batchnorm_frozen_at(m.self, bn, 1) == TP_OK);
  REQUIRE(m.t.set_training(m.self, true) == TP_OK);
  CHECK(net.is_training());
  CHECK_FALSE(net.norm_->is_training());
  // A name that is no BatchNorm layer is refused naming it; the set stays as it was.
  const char* const lin[] = {"lin"};
  CHECK(m.t.set_batchnorm_frozen_at(m.self, lin, 1) == TP_ERR_UNSUPPORTED);
  CHECK(m.host.last_error.find("'lin' is not a BatchNorm layer") != std::string::npos);
  CHECK_FALSE(net.norm_->is_training());
  // Clearing the set leaves the model-wide switch in force (review finding: it released it).
  REQUIRE(m.t.set_batchnorm_frozen(m.self, true) == TP_OK);
  REQUIRE(m.t.set_batchnorm_frozen_at(m.self, nullptr, 0) == TP_OK);
  CHECK_FALSE(net.norm_->is_training());
  REQUIRE(m.t.set_batchnorm_frozen(m.self, false) == TP_OK);
  CHECK(net.norm_->is_training());
}

TEST_CASE("model adapter: a throwing constructor is a status with the message") {
  SUBCASE("tp::cpp::Failure") {
    ModelAdapterInstance m(kScale, 1);
    int sentinel = 0;
    m.self = &sentinel;
    CHECK(m.create() == TP_ERR_CONFIG);
    CHECK(m.self == nullptr);
    m.self = nullptr;
    CHECK(m.host.last_error == "scale: mode 1 refuses the config");
  }
  SUBCASE("c10::Error, without its backtrace") {
    ModelAdapterInstance m(kScale, 2);
    CHECK(m.create() == TP_ERR_INTERNAL);
    CHECK(m.host.last_error.find("scale: a c10::Error from the constructor") != std::string::npos);
    CHECK(m.host.last_error.find("Exception raised from") == std::string::npos);
  }
  SUBCASE("NULL config") {
    ModelAdapterInstance m(kScale);
    CHECK(m.t.create(&m.host.host, nullptr, &m.self) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "scale: config view is NULL");
  }
}

TEST_CASE("model adapter: a failing forward hands over no output and leaks none") {
  const at::Tensor x = at::tensor({1.0f, 2.0f});
  const tp_named_tensor_t inputs[] = {{"x", tp::test::handle_of(x)}};
  tp_named_tensor_t out[2] = {{"untouched", nullptr}, {"untouched", nullptr}};
  uint32_t count = 99;

  SUBCASE("more outputs than capacity") {
    ModelAdapterInstance m(kScale, 3);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.forward(m.self, inputs, 1, out, 1, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "scale: forward: the model has 2 outputs but capacity is 1");
    CHECK(count == 0);
    CHECK(out[0].tensor == nullptr);
    REQUIRE(m.scale().made_.size() == 2);
    CHECK(m.scale().made_[0].use_count() == 1);
    CHECK(m.scale().made_[1].use_count() == 1);
  }
  SUBCASE("an output without a name: the one already wrapped is freed") {
    ModelAdapterInstance m(kScale, 4);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.forward(m.self, inputs, 1, out, 2, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "scale: forward: an output has no name");
    CHECK(count == 0);
    CHECK(out[0].tensor == nullptr);
    CHECK(m.scale().made_[0].use_count() == 1);
  }
  SUBCASE("the class throws") {
    ModelAdapterInstance m(kScale, 5);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.forward(m.self, inputs, 1, out, 2, &count) == TP_ERR_INTERNAL);
    CHECK(m.host.last_error == "scale: failed after computing y");
    CHECK(count == 0);
    CHECK(out[0].tensor == nullptr);
  }
  SUBCASE("a missing input names the ones present") {
    ModelAdapterInstance m(kScale);
    REQUIRE(m.create() == TP_OK);
    const tp_named_tensor_t other[] = {{"a", tp::test::handle_of(x)}};
    CHECK(m.t.forward(m.self, other, 1, out, 2, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "no input named 'x' (present: a)");
    CHECK(count == 0);
  }
  SUBCASE("success: one new reference, released by the receiver") {
    ModelAdapterInstance m(kScale);
    REQUIRE(m.create() == TP_OK);
    REQUIRE(m.t.forward(m.self, inputs, 1, out, 2, &count) == TP_OK);
    REQUIRE(count == 1);
    CHECK(std::string(out[0].name) == "y");
    CHECK(m.scale().made_[0].use_count() == 2);  // the model's copy and the handle
    CHECK(at::equal(tp::test::tensor_of(out[0].tensor), at::tensor({1.0f, 2.0f})));
    delete reinterpret_cast<at::Tensor*>(out[0].tensor);
    CHECK(m.scale().made_[0].use_count() == 1);
  }
}

TEST_CASE("model adapter: state aliases the module, follows to_device, keeps integer buffers") {
  ModelAdapterInstance m(kScale);
  REQUIRE(m.create() == TP_OK);
  auto state = m.visit();
  REQUIRE(state.size() == 2);
  CHECK(std::get<0>(state[0]) == "w");
  CHECK_FALSE(std::get<1>(state[0]));
  CHECK(std::get<0>(state[1]) == "calls");
  CHECK(std::get<1>(state[1]));
  {
    at::NoGradGuard no_grad;
    std::get<2>(state[0]).mul_(3);  // the host's in-place update reaches the module
  }
  const at::Tensor x = at::tensor({1.0f, 1.0f});
  const tp_named_tensor_t inputs[] = {{"x", tp::test::handle_of(x)}};
  tp_named_tensor_t out[1] = {};
  uint32_t count = 0;
  REQUIRE(m.t.forward(m.self, inputs, 1, out, 1, &count) == TP_OK);
  CHECK(at::equal(tp::test::tensor_of(out[0].tensor), at::tensor({3.0f, 3.0f})));
  delete reinterpret_cast<at::Tensor*>(out[0].tensor);

  REQUIRE(m.t.to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK);
  CHECK((m.scale().dtype_ == at::kDouble));
  state = m.visit();
  CHECK((std::get<2>(state[0]).scalar_type() == at::kDouble));
  CHECK((std::get<2>(state[1]).scalar_type() == at::kLong));  // not turned into a float
  CHECK(m.t.to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_INT64) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.host.last_error.find("floating") != std::string::npos);

  CHECK(m.t.set_training(m.self, false) == TP_OK);
  CHECK_FALSE(m.scale().is_training());
  CHECK(m.t.visit_state(m.self, nullptr, nullptr) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("model adapter: state_root, a factory, the checkpointing switch, NULL instances") {
  {
    ModelAdapterInstance m(kHolder);
    REQUIRE(m.create() == TP_OK);
    const auto state = m.visit();
    REQUIRE(state.size() == 2);
    CHECK(std::get<0>(state[0]) == "weight");
    CHECK(std::get<0>(state[1]) == "bias");
  }
  {
    ModelAdapterInstance m(kSwitchable);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.set_activation_checkpointing(m.self, false) == TP_OK);
    CHECK(m.t.set_activation_checkpointing(m.self, true) == TP_ERR_UNSUPPORTED);
    CHECK(m.host.last_error == "switchable: nothing to checkpoint");
    CHECK(m.t.set_activation_checkpointing(nullptr, true) == TP_ERR_INVALID_ARGUMENT);
  }
  const tp_model_v1_t& t = model_adapter_table_of(kScale);
  t.destroy(nullptr);
  CHECK(t.set_training(nullptr, true) == TP_ERR_INVALID_ARGUMENT);
  CHECK(t.to_device(nullptr, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT32) == TP_ERR_INVALID_ARGUMENT);
  uint32_t count = 7;
  CHECK(t.forward(nullptr, nullptr, 0, nullptr, 0, &count) == TP_ERR_INVALID_ARGUMENT);
  CHECK(count == 0);
}
