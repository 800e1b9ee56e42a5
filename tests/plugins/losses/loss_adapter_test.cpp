// tp/cpp/loss_adapter.h on its own: the tp.loss/1 tables it generates from C++ classes, called
// directly (no library) with a FakeHost. A throwing class yields a status and the host's message;
// a failing forward or terms call hands over no handle and leaks none (the loss keeps a reference to
// what it made, so a leaked handle shows as a second reference); the terms entry exists only for a
// class with terms(); destroy(NULL) is a no-op.
#include "tp/cpp/loss_adapter.h"  // before the harness: c10's CHECK is replaced by doctest's there

#include <ATen/ops/scalar_tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "support/plugin_harness.h"

namespace {

using tp::test::FakeConfig;
using tp::test::FakeHost;

/// sum = Σ (y - t)^2 over the batch, count = batch size; `mode` (config) picks a way to fail.
class Squared {
 public:
  explicit Squared(const tp::cpp::ConfigReader& cfg) : mode_(cfg.get_int("mode")) {
    if (mode_ == 1) throw tp::cpp::Failure(TP_ERR_CONFIG, "squared: mode 1 refuses the config");
  }
  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {
    const at::Tensor& y = outputs.get("y");
    made_ = (y - targets.get("t")).pow(2).sum();
    if (mode_ == 2) throw std::runtime_error("squared: failed after computing the sum");
    if (mode_ == 3) return {made_, at::Tensor()};
    return {made_, at::scalar_tensor(y.size(0), at::TensorOptions().dtype(at::kLong))};
  }
  at::Tensor made_;

 private:
  int64_t mode_;
};

/// Squared plus two named terms (the halves of the sum); `mode` 4 names one term NULL.
class Split : public Squared {
 public:
  explicit Split(const tp::cpp::ConfigReader& cfg) : Squared(cfg), unnamed_(cfg.get_int("mode") == 4) {}
  std::vector<tp::cpp::LossTerm> terms() const {
    const at::Tensor half = made_.detach() / 2;
    return {{"first", half}, {unnamed_ ? nullptr : "second", half}};
  }

 private:
  bool unnamed_;
};

/// An abstract base and a factory standing in for the constructor (basic_losses does this).
class Base {
 public:
  virtual ~Base() = default;
  virtual tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) = 0;
};
class Zero : public Base {
 public:
  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields&) override {
    return {outputs.get("y").sum() * 0, at::scalar_tensor(0, at::TensorOptions().dtype(at::kLong))};
  }
};
std::unique_ptr<Base> make_zero(const tp::cpp::ConfigReader&) { return std::make_unique<Zero>(); }

const tp_config_key_t kLossAdapterKeys[] = {{sizeof(tp_config_key_t), "mode", TP_CFG_INT, "0", "how it fails (0: never)"}};
const tp_example_input_t kLossAdapterExamples[] = {{sizeof(tp_example_input_t), "t", TP_DTYPE_FLOAT32, 1, {2}, 0}};
const tp_descriptor_t kSquaredDescriptor =
    tp::cpp::loss_descriptor("org.torchhost.test.squared", "1.0.0", "sum of squares", kLossAdapterKeys, kLossAdapterExamples);
const tp_descriptor_t kZeroDescriptor = tp::cpp::loss_descriptor("org.torchhost.test.zero", "1.0.0", "zero", kLossAdapterKeys);

const tp::cpp::Component kSquared = tp::cpp::loss_component<Squared, kSquaredDescriptor>();
const tp::cpp::Component kSplit = tp::cpp::loss_component<Split, kSquaredDescriptor>();
const tp::cpp::Component kZero = tp::cpp::loss_component<Base, kZeroDescriptor, &make_zero>();

const tp_loss_v1_t& loss_adapter_table_of(const tp::cpp::Component& c) { return *static_cast<const tp_loss_v1_t*>(c.table); }

/// An instance made through a table; destroyed at scope exit.
struct LossAdapterInstance {
  FakeHost host;
  FakeConfig cfg;
  const tp_loss_v1_t& t;
  void* self = nullptr;

  explicit LossAdapterInstance(const tp::cpp::Component& c, int64_t mode = 0) : t(loss_adapter_table_of(c)) { cfg.values = {{"mode", mode}}; }
  ~LossAdapterInstance() { t.destroy(self); }
  tp_status create() { return t.create(&host.host, &cfg.view, &self); }
  Squared& loss() { return *static_cast<tp::cpp::detail::AdaptedInstance<Squared>*>(self)->object; }
};

const at::Tensor kY = at::tensor({1.0f, 2.0f});
const at::Tensor kT = at::tensor({0.0f, 4.0f});

}  // namespace

TEST_CASE("loss adapter: descriptor and table") {
  CHECK(kSquaredDescriptor.struct_size == sizeof(tp_descriptor_t));
  CHECK(kSquaredDescriptor.kind == TP_KIND_LOSS);
  CHECK(kSquaredDescriptor.tier == TP_TIER_T);
  CHECK(kSquaredDescriptor.key_count == 1);
  CHECK(kSquaredDescriptor.example_count == 1);
  CHECK(kZeroDescriptor.examples == nullptr);
  CHECK(std::string(kSquared.interface_id) == TP_IFACE_LOSS_V1);
  const tp_loss_v1_t& t = loss_adapter_table_of(kSquared);
  CHECK(t.struct_size == sizeof(tp_loss_v1_t));
  // ABI 1.3: the terms entry only for a class that has terms().
  CHECK((t.terms == nullptr));
  CHECK((loss_adapter_table_of(kSplit).terms != nullptr));
  t.destroy(nullptr);  // PLG-12
}

TEST_CASE("loss adapter: forward hands over the sum and the count, each a new reference") {
  LossAdapterInstance m(kSquared);
  REQUIRE(m.create() == TP_OK);
  const tp_named_tensor_t outputs[] = {{"y", tp::test::handle_of(kY)}};
  const tp_named_tensor_t targets[] = {{"t", tp::test::handle_of(kT)}};
  tp_tensor sum = nullptr, count = nullptr;
  REQUIRE(m.t.forward(m.self, outputs, 1, targets, 1, &sum, &count) == TP_OK);
  CHECK(tp::test::tensor_of(sum).item<float>() == 5.0f);  // 1 + 4
  CHECK(tp::test::tensor_of(count).item<int64_t>() == 2);
  CHECK(m.loss().made_.use_count() == 2);  // the loss's copy and the handle
  delete reinterpret_cast<at::Tensor*>(sum);
  delete reinterpret_cast<at::Tensor*>(count);
  CHECK(m.loss().made_.use_count() == 1);
}

TEST_CASE("loss adapter: a failing forward hands over nothing and names what is wrong") {
  const tp_named_tensor_t outputs[] = {{"y", tp::test::handle_of(kY)}};
  const tp_named_tensor_t targets[] = {{"t", tp::test::handle_of(kT)}};
  tp_tensor sum = nullptr, count = nullptr;
  SUBCASE("a missing target names the role and the fields present") {
    LossAdapterInstance m(kSquared);
    REQUIRE(m.create() == TP_OK);
    const tp_named_tensor_t other[] = {{"label", tp::test::handle_of(kT)}};
    CHECK(m.t.forward(m.self, outputs, 1, other, 1, &sum, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "no target named 't' (present: label)");
    CHECK(m.t.forward(m.self, other, 1, targets, 1, &sum, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "no output named 'y' (present: label)");
  }
  SUBCASE("the class throws after making the sum") {
    LossAdapterInstance m(kSquared, 2);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.forward(m.self, outputs, 1, targets, 1, &sum, &count) == TP_ERR_INTERNAL);
    CHECK(m.host.last_error == "squared: failed after computing the sum");
    CHECK(m.loss().made_.use_count() == 1);
  }
  SUBCASE("an undefined count: the sum already made is not handed over") {
    LossAdapterInstance m(kSquared, 3);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.forward(m.self, outputs, 1, targets, 1, &sum, &count) == TP_ERR_INTERNAL);
    CHECK(m.host.last_error == "squared: forward returned an undefined sum or count");
    CHECK(m.loss().made_.use_count() == 1);
  }
  SUBCASE("NULL out-parameters, arrays or instance") {
    LossAdapterInstance m(kSquared);
    REQUIRE(m.create() == TP_OK);
    CHECK(m.t.forward(m.self, outputs, 1, targets, 1, nullptr, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.t.forward(m.self, nullptr, 1, targets, 1, &sum, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "squared: forward: outputs or targets is NULL");
    CHECK(m.t.forward(nullptr, outputs, 1, targets, 1, &sum, &count) == TP_ERR_INVALID_ARGUMENT);
  }
  CHECK(sum == nullptr);
  CHECK(count == nullptr);
}

TEST_CASE("loss adapter: terms are new references, handed over only all together") {
  const tp_named_tensor_t outputs[] = {{"y", tp::test::handle_of(kY)}};
  const tp_named_tensor_t targets[] = {{"t", tp::test::handle_of(kT)}};
  tp_tensor sum = nullptr, count = nullptr;
  tp_named_tensor_t terms[2] = {};
  uint32_t n = 99;
  SUBCASE("success") {
    LossAdapterInstance m(kSplit);
    REQUIRE(m.create() == TP_OK);
    REQUIRE(m.t.forward(m.self, outputs, 1, targets, 1, &sum, &count) == TP_OK);
    REQUIRE(m.t.terms(m.self, terms, 2, &n) == TP_OK);
    REQUIRE(n == 2);
    CHECK(std::string(terms[0].name) == "first");
    CHECK(std::string(terms[1].name) == "second");
    CHECK(tp::test::tensor_of(terms[0].tensor).item<float>() + tp::test::tensor_of(terms[1].tensor).item<float>() ==
          tp::test::tensor_of(sum).item<float>());
    CHECK_FALSE(tp::test::tensor_of(terms[0].tensor).requires_grad());
    for (tp_tensor h : {sum, count, terms[0].tensor, terms[1].tensor}) delete reinterpret_cast<at::Tensor*>(h);
  }
  SUBCASE("too small a capacity, or a term without a name") {
    LossAdapterInstance small(kSplit);
    REQUIRE(small.create() == TP_OK);
    REQUIRE(small.t.forward(small.self, outputs, 1, targets, 1, &sum, &count) == TP_OK);
    for (tp_tensor h : {sum, count}) delete reinterpret_cast<at::Tensor*>(h);
    CHECK(small.t.terms(small.self, terms, 1, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(small.host.last_error == "squared: terms: 2 terms but capacity is 1");
    CHECK(n == 0);
    CHECK(terms[0].tensor == nullptr);

    LossAdapterInstance unnamed(kSplit, 4);
    REQUIRE(unnamed.create() == TP_OK);
    REQUIRE(unnamed.t.forward(unnamed.self, outputs, 1, targets, 1, &sum, &count) == TP_OK);
    for (tp_tensor h : {sum, count}) delete reinterpret_cast<at::Tensor*>(h);
    CHECK(unnamed.t.terms(unnamed.self, terms, 2, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(unnamed.host.last_error == "squared: terms: a term has no name");
    CHECK(n == 0);
    CHECK(terms[0].tensor == nullptr);
  }
}

TEST_CASE("loss adapter: create refuses with the class's message; a factory may build an abstract base") {
  {
    LossAdapterInstance m(kSquared, 1);
    int sentinel = 0;
    m.self = &sentinel;
    CHECK(m.create() == TP_ERR_CONFIG);
    CHECK(m.self == nullptr);
    CHECK(m.host.last_error == "squared: mode 1 refuses the config");
    CHECK(m.t.create(&m.host.host, &m.cfg.view, nullptr) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "squared: out_self is NULL");
  }
  LossAdapterInstance z(kZero);
  REQUIRE(z.create() == TP_OK);
  const tp_named_tensor_t outputs[] = {{"y", tp::test::handle_of(kY)}};
  tp_tensor sum = nullptr, count = nullptr;
  REQUIRE(z.t.forward(z.self, outputs, 1, nullptr, 0, &sum, &count) == TP_OK);
  CHECK(tp::test::tensor_of(sum).item<float>() == 0.0f);
  for (tp_tensor h : {sum, count}) delete reinterpret_cast<at::Tensor*>(h);
}
