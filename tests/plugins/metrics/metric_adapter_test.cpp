// tp/cpp/metric_adapter.h on its own: the tp.metric/1 tables it generates from C++ classes, called
// directly (no library) with a FakeHost. The state lent by visit_state aliases the class's
// members (the host's in-place all-reduce reaches them) and survives to_device; reset zeroes it;
// a throwing class yields a status and the host's message; destroy(NULL) is a no-op. Gathered
// rows (ABI 1.7) accumulate batch by batch, are lent concatenated, take the host's gather in place
// (Tensor::set_) and are emptied by reset; a class without them leaves visit_gathered_state NULL.
#include "tp/cpp/metric_adapter.h"  // before the harness: c10's CHECK is replaced by doctest's there

#include <ATen/ops/zeros.h>

#include <memory>
#include <string>
#include <vector>

#include "support/plugin_harness.h"

namespace {

using tp::test::FakeConfig;
using tp::test::FakeHost;

/// Mean absolute error. State: sum (float64), count (int64). `mode` (config) picks a way to fail.
class MeanError {
 public:
  explicit MeanError(const tp::cpp::ConfigReader& cfg) : mode_(cfg.get_int("mode")) {
    if (mode_ == 1) throw tp::cpp::Failure(TP_ERR_CONFIG, "mean_error: mode 1 refuses the config");
  }
  std::vector<tp::cpp::StateSlot> state() { return {{"sum", &sum_}, {"count", &count_}}; }
  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {
    const at::Tensor& y = outputs.get("y");  // before the target: a missing output is reported first
    const at::Tensor error = (y - targets.get("t")).abs();
    sum_.add_(error.sum().to(at::kDouble));
    count_.add_(error.numel());
  }
  std::vector<tp_scalar_t> compute() {
    if (mode_ == 2) return {{"mean_error", 0.0}, {"extra", 0.0}};
    return {{"mean_error", sum_.item<double>() / count_.item<double>()}};
  }
  at::Tensor sum_ = at::zeros({}, at::kDouble);
  at::Tensor count_ = at::zeros({}, at::kLong);

 private:
  int64_t mode_;
};

/// An abstract base and a factory standing in for the constructor (basic_metrics does this).
class Base {
 public:
  virtual ~Base() = default;
  virtual std::vector<tp::cpp::StateSlot> state() = 0;
  virtual void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) = 0;
  virtual std::vector<tp_scalar_t> compute() = 0;
};
class Nothing : public Base {
 public:
  std::vector<tp::cpp::StateSlot> state() override { return {}; }
  void update(const tp::cpp::Fields&, const tp::cpp::Fields&) override {}
  std::vector<tp_scalar_t> compute() override { return {}; }
};
std::shared_ptr<Base> make_nothing(const tp::cpp::ConfigReader&) { return std::make_shared<Nothing>(); }

/// The median of every y seen: rows, since medians do not add up across ranks.
class Median {
 public:
  explicit Median(const tp::cpp::ConfigReader&) {}
  std::vector<tp::cpp::StateSlot> state() { return {}; }
  std::vector<tp::cpp::GatheredSlot> gathered_state() { return {{"values", &values_}}; }
  void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields&) { values_.append(outputs.get("y").reshape({-1, 1}), "median"); }
  std::vector<tp_scalar_t> compute() {
    const at::Tensor all = values_.rows();
    return {{"median", all.numel() == 0 ? -1.0 : all.median().item<double>()}, {"rows", static_cast<double>(all.size(0))}};
  }
  tp::cpp::GatheredRows values_{{1}, at::kDouble};
};

const tp_config_key_t kMetricAdapterKeys[] = {{sizeof(tp_config_key_t), "mode", TP_CFG_INT, "0", "how it fails (0: never)"}};
const tp_descriptor_t kDescriptor =
    tp::cpp::metric_descriptor("org.torchhost.test.mean_error", "1.0.0", "mean |y - t|", kMetricAdapterKeys);

const tp::cpp::Component kMeanError = tp::cpp::metric_component<MeanError, kDescriptor>();
const tp::cpp::Component kNothing = tp::cpp::metric_component<Base, kDescriptor, &make_nothing>();
const tp::cpp::Component kMedian = tp::cpp::metric_component<Median, kDescriptor>();

const tp_metric_v1_t& metric_adapter_table_of(const tp::cpp::Component& c) { return *static_cast<const tp_metric_v1_t*>(c.table); }

/// An instance made through a table; destroyed at scope exit.
struct MetricAdapterInstance {
  FakeHost host;
  FakeConfig cfg;
  const tp_metric_v1_t& t;
  void* self = nullptr;

  explicit MetricAdapterInstance(const tp::cpp::Component& c, int64_t mode = 0) : t(metric_adapter_table_of(c)) { cfg.values = {{"mode", mode}}; }
  ~MetricAdapterInstance() { t.destroy(self); }
  tp_status create() { return t.create(&host.host, &cfg.view, &self); }
  MeanError& metric() { return *static_cast<tp::cpp::detail::AdaptedInstance<MeanError>*>(self)->object; }
  tp_status update(const at::Tensor& y, const at::Tensor& target) {
    const tp_named_tensor_t outputs[] = {{"y", tp::test::handle_of(y)}};
    const tp_named_tensor_t targets[] = {{"t", tp::test::handle_of(target)}};
    return t.update(self, outputs, 1, targets, 1);
  }
};

}  // namespace

TEST_CASE("metric adapter: descriptor and table") {
  CHECK(kDescriptor.struct_size == sizeof(tp_descriptor_t));
  CHECK(kDescriptor.kind == TP_KIND_METRIC);
  CHECK(kDescriptor.tier == TP_TIER_T);
  CHECK(kDescriptor.key_count == 1);
  CHECK(kDescriptor.examples == nullptr);
  CHECK(std::string(kMeanError.interface_id) == TP_IFACE_METRIC_V1);
  const tp_metric_v1_t& t = metric_adapter_table_of(kMeanError);
  CHECK(t.struct_size == sizeof(tp_metric_v1_t));
  CHECK((t.to_device != nullptr && t.reset != nullptr && t.visit_state != nullptr && t.compute != nullptr));
  t.destroy(nullptr);  // PLG-12
}

TEST_CASE("metric adapter: update, the lent state (an all-reduce writes into it), compute, reset") {
  MetricAdapterInstance m(kMeanError);
  REQUIRE(m.create() == TP_OK);
  REQUIRE(m.t.to_device(m.self, TP_DEVICE_CPU, 0) == TP_OK);
  REQUIRE_MESSAGE(m.update(at::tensor({1.0f, 2.0f}), at::tensor({0.0f, 4.0f})) == TP_OK, m.host.last_error);
  auto state = tp::test::visit_all(m.t.visit_state, m.self);
  REQUIRE(state.size() == 2);
  CHECK(state[0].name == "sum");
  CHECK(state[1].name == "count");
  CHECK(state[0].is_buffer);
  CHECK(&tp::test::tensor_of(state[0].handle) == &m.metric().sum_);  // aliases the member
  // A second rank's state, added in place as the host's all-reduce does.
  tp::test::tensor_of(state[0].handle).add_(3.0);
  tp::test::tensor_of(state[1].handle).add_(1);
  tp_scalar_t values[2] = {};
  uint32_t n = 0;
  REQUIRE(m.t.compute(m.self, values, 2, &n) == TP_OK);
  REQUIRE(n == 1);
  CHECK(std::string(values[0].name) == "mean_error");
  CHECK(values[0].value == doctest::Approx(2.0));  // (1 + 2 + 3) / 3

  REQUIRE(m.t.reset(m.self) == TP_OK);
  CHECK(m.metric().sum_.item<double>() == 0.0);
  CHECK(m.metric().count_.item<int64_t>() == 0);
  CHECK((m.metric().count_.scalar_type() == at::kLong));  // reset keeps the dtype

  CHECK(m.t.to_device(m.self, 7, 0) == TP_ERR_INVALID_ARGUMENT);
  CHECK(m.host.last_error == "mean_error: to_device: unknown device type 7");
  CHECK(m.t.visit_state(m.self, nullptr, nullptr) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("metric adapter: errors are statuses with the class's or the adapter's message") {
  SUBCASE("a refused config; a NULL out_self") {
    MetricAdapterInstance m(kMeanError, 1);
    CHECK(m.create() == TP_ERR_CONFIG);
    CHECK(m.self == nullptr);
    CHECK(m.host.last_error == "mean_error: mode 1 refuses the config");
    CHECK(m.t.create(&m.host.host, &m.cfg.view, nullptr) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "mean_error: out_self is NULL");
  }
  SUBCASE("a missing field names the role and the fields present") {
    MetricAdapterInstance m(kMeanError);
    REQUIRE(m.create() == TP_OK);
    const at::Tensor x = at::tensor({1.0f});
    const tp_named_tensor_t fields[] = {{"z", tp::test::handle_of(x)}};
    CHECK(m.t.update(m.self, fields, 1, fields, 1) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "no output named 'y' (present: z)");
    CHECK(m.t.update(m.self, nullptr, 1, fields, 1) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "mean_error: update: outputs or targets is NULL");
  }
  SUBCASE("more values than capacity: none handed over") {
    MetricAdapterInstance m(kMeanError, 2);
    REQUIRE(m.create() == TP_OK);
    tp_scalar_t values[1] = {};
    uint32_t n = 99;
    CHECK(m.t.compute(m.self, values, 1, &n) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.host.last_error == "mean_error: compute: the metric has 2 values but capacity is 1");
    CHECK(n == 0);
  }
  SUBCASE("a NULL instance") {
    MetricAdapterInstance m(kMeanError);
    CHECK(m.t.reset(nullptr) == TP_ERR_INVALID_ARGUMENT);
    CHECK(m.t.to_device(nullptr, TP_DEVICE_CPU, 0) == TP_ERR_INVALID_ARGUMENT);
  }
}

TEST_CASE("metric adapter: a factory may build an abstract base") {
  MetricAdapterInstance m(kNothing);
  REQUIRE(m.create() == TP_OK);
  CHECK(tp::test::visit_all(m.t.visit_state, m.self).empty());
  uint32_t n = 99;
  REQUIRE(m.t.compute(m.self, nullptr, 0, &n) == TP_OK);
  CHECK(n == 0);
}

TEST_CASE("metric adapter: gathered rows (ABI 1.7) append, are lent whole, take the host's gather, and reset empties them") {
  CHECK((metric_adapter_table_of(kMeanError).visit_gathered_state == nullptr));  // sums only: the host gathers nothing
  MetricAdapterInstance m(kMedian);
  REQUIRE(m.create() == TP_OK);
  REQUIRE((m.t.visit_gathered_state != nullptr));
  REQUIRE(m.t.to_device(m.self, TP_DEVICE_CPU, 0) == TP_OK);
  REQUIRE_MESSAGE(m.update(at::tensor({5.0f, 1.0f}), at::tensor({0.0f})) == TP_OK, m.host.last_error);
  REQUIRE_MESSAGE(m.update(at::tensor({3.0f}), at::tensor({0.0f})) == TP_OK, m.host.last_error);
  auto rows = tp::test::visit_all(m.t.visit_gathered_state, m.self);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].name == "values");
  const at::Tensor lent = tp::test::tensor_of(rows[0].handle);  // shares the TensorImpl, as the host's copy
  CHECK(lent.equal(at::tensor({5.0, 1.0, 3.0}, at::kDouble).reshape({3, 1})));
  // A second rank's rows, gathered after this rank's, as the host's all_gather_rows does.
  at::Tensor alias = lent;
  alias.set_(at::cat({lent, at::tensor({10.0, 11.0}, at::kDouble).reshape({2, 1})}));
  tp_scalar_t values[2] = {};
  uint32_t n = 0;
  REQUIRE(m.t.compute(m.self, values, 2, &n) == TP_OK);
  CHECK(values[0].value == 5.0);  // the median of 1, 3, 5, 10, 11
  CHECK(values[1].value == 5.0);  // rows

  REQUIRE(m.t.reset(m.self) == TP_OK);
  REQUIRE(m.t.compute(m.self, values, 2, &n) == TP_OK);
  CHECK(values[1].value == 0.0);
  CHECK(m.t.visit_gathered_state(m.self, nullptr, nullptr) == TP_ERR_INVALID_ARGUMENT);
  // Rows of another shape are refused with both shapes.
  tp::cpp::GatheredRows boxes({4}, at::kDouble);
  CHECK_THROWS_WITH_AS(boxes.append(at::ones({2, 3}), "boxes"), "boxes: rows of shape [N, 4] expected, got [2, 3]",
                       tp::cpp::Failure);
  boxes.append(at::ones({2, 4}, at::kFloat), "boxes");
  boxes.append(at::ones({0, 4}), "boxes");
  CHECK((boxes.rows().scalar_type() == at::kDouble));
  CHECK(boxes.rows().size(0) == 2);
}
