// tp/cpp/dataset_adapter.h and tp/cpp/callback_adapter.h on their own: the C tables they generate
// from C++ classes, called directly (no library, no host) with tests/support/fake_host.h. A
// throwing class yields a status and the host's message, never an exception; on a failing
// get_sample no field is handed over and every field made so far is released; destroy(NULL) is a
// no-op.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "support/fake_host.h"
#include "tp/cpp/callback_adapter.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/tp.h"

namespace {

using tp::test::FakeConfig;
using tp::test::FakeHost;

/// Deleters of counted fields run so far (this test program's own count, like DeleterSpy's).
std::atomic<int>& deleted_fields() {
  static std::atomic<int> n{0};
  return n;
}

/// A field whose deleter counts into deleted_fields(), so a test sees every release.
struct CountedTensor {
  DLManagedTensor managed{};
  float value = 0;
};

tp_field_t counted_field(const char* name) {
  auto* owned = new CountedTensor{};
  DLTensor& t = owned->managed.dl_tensor;
  t.data = &owned->value;
  t.device = {kDLCPU, 0};
  t.ndim = 0;
  t.dtype = {kDLFloat, 32, 1};
  owned->managed.manager_ctx = owned;
  owned->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<CountedTensor*>(self->manager_ctx);
    ++deleted_fields();
  };
  return {name, &owned->managed};
}

/// `mode` (config) chooses how the constructor fails; get_sample makes two counted fields, then
/// fails at odd indices (after making them) and needs the host's seed at index 4.
class Flaky {
 public:
  explicit Flaky(const tp::cpp::DatasetArgs& args) {
    switch (args.config.get_int("mode")) {
      case 1: throw tp::cpp::Failure(TP_ERR_CONFIG, "flaky: mode 1 refuses the config");
      case 2: throw std::runtime_error("flaky: a std::exception from the constructor");
      case 3: throw 42;  // not even an exception class
      default: break;
    }
    count_ = static_cast<uint64_t>(args.config.get_int_in("size", 1, 100));
  }
  uint64_t size() const { return count_; }
  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    out.add(counted_field("a"));
    out.add(counted_field("b"));
    if (index % 2 == 1) throw std::runtime_error("flaky: cannot decode sample " + std::to_string(index));
    if (index == 4) (void)ctx.seed("augmentation");
  }

 private:
  uint64_t count_ = 0;
};

/// With set_epoch, so the table's optional entry is filled.
class WithEpoch {
 public:
  explicit WithEpoch(const tp::cpp::DatasetArgs& args) : train_(args.train()) {}
  uint64_t size() const { return 3; }
  void get_sample(uint64_t index, const tp::cpp::WorkerContext&, tp::cpp::Sample& out) const {
    out.add("x", std::vector<int64_t>{static_cast<int64_t>(index + 10 * epoch_)}, {});
    out.add("train", std::vector<uint8_t>{train_ ? uint8_t{1} : uint8_t{0}}, {1});
  }
  void set_epoch(uint64_t epoch) {
    if (epoch > 9) throw tp::cpp::Failure(TP_ERR_OUT_OF_RANGE, "with_epoch: epoch " + std::to_string(epoch));
    epoch_ = epoch;
  }

 private:
  bool train_;
  uint64_t epoch_ = 0;
};

const tp_config_key_t kFlakyKeys[] = {
    {sizeof(tp_config_key_t), "mode", TP_CFG_INT, "0", "how the constructor fails (0: it does not)"},
    {sizeof(tp_config_key_t), "size", TP_CFG_INT, "8", "samples"},
};
const tp_descriptor_t kFlakyDescriptor =
    tp::cpp::dataset_descriptor("org.torchhost.test.flaky", "1.0.0", "throws on purpose", kFlakyKeys);
const tp_config_key_t kNoKeys[] = {{sizeof(tp_config_key_t), "unused", TP_CFG_INT, "0", "nothing"}};
const tp_descriptor_t kEpochDescriptor =
    tp::cpp::dataset_descriptor("org.torchhost.test.with_epoch", "1.0.0", "epoch-dependent", kNoKeys, TP_DESCRIPTOR_SERIAL);

const tp::cpp::Component kFlaky = tp::cpp::dataset_component<Flaky, kFlakyDescriptor>();
const tp::cpp::Component kEpoch = tp::cpp::dataset_component<WithEpoch, kEpochDescriptor>();

const tp_dataset_v1_t& dataset_adapter_table_of(const tp::cpp::Component& c) { return *static_cast<const tp_dataset_v1_t*>(c.table); }

/// A Flaky instance made through the table, destroyed at scope exit.
struct FlakyInstance {
  FakeHost host;
  FakeConfig cfg;
  const int deleted_before = deleted_fields().load();
  void* self = nullptr;
  const tp_dataset_v1_t& t = dataset_adapter_table_of(kFlaky);

  explicit FlakyInstance(int64_t mode = 0) { cfg.values = {{"mode", mode}, {"size", int64_t{8}}}; }
  /// Counted fields released since this instance was made.
  int deleted() const { return deleted_fields().load() - deleted_before; }
  tp_status create(const char* split = "train") { return t.create(&host.host, &cfg.view, split, &self); }
  ~FlakyInstance() { t.destroy(self); }
};

}  // namespace

TEST_CASE("dataset adapter: the descriptor and table it generates") {
  CHECK(kFlakyDescriptor.struct_size == sizeof(tp_descriptor_t));
  CHECK(kFlakyDescriptor.kind == TP_KIND_DATASET);
  CHECK(kFlakyDescriptor.tier == TP_TIER_S);
  CHECK(kFlakyDescriptor.key_count == 2);
  CHECK(kFlakyDescriptor.keys == kFlakyKeys);
  CHECK(kEpochDescriptor.flags == TP_DESCRIPTOR_SERIAL);
  CHECK(std::string(kFlaky.interface_id) == TP_IFACE_DATASET_V1);
  const tp_dataset_v1_t& t = dataset_adapter_table_of(kFlaky);
  CHECK(t.struct_size == sizeof(tp_dataset_v1_t));
  CHECK((t.create != nullptr));
  CHECK((t.get_sample != nullptr));
  CHECK((t.set_epoch == nullptr));  // Flaky has no set_epoch
  CHECK((dataset_adapter_table_of(kEpoch).set_epoch != nullptr));
  CHECK(std::string(tp::cpp::component_name(kFlakyDescriptor)) == "flaky");
}

TEST_CASE("dataset adapter: a throwing constructor is a status with the message, *out_self NULL") {
  SUBCASE("tp::cpp::Failure keeps its code") {
    FlakyInstance f(1);
    int sentinel = 0;
    f.self = &sentinel;  // create must clear it
    CHECK(f.create() == TP_ERR_CONFIG);
    CHECK(f.self == nullptr);
    f.self = nullptr;
    CHECK(f.host.last_error == "flaky: mode 1 refuses the config");
  }
  SUBCASE("std::exception is TP_ERR_INTERNAL") {
    FlakyInstance f(2);
    CHECK(f.create() == TP_ERR_INTERNAL);
    CHECK(f.host.last_error == "flaky: a std::exception from the constructor");
  }
  SUBCASE("anything else is TP_ERR_INTERNAL, unknown exception") {
    FlakyInstance f(3);
    CHECK(f.create() == TP_ERR_INTERNAL);
    CHECK(f.host.last_error == "unknown exception");
  }
  SUBCASE("a range check of ConfigReader names the component and key") {
    FlakyInstance f;
    f.cfg.values["size"] = int64_t{0};
    CHECK(f.create() == TP_ERR_CONFIG);
    CHECK(f.host.last_error == "flaky: size = 0 is outside [1, 100]");
  }
  SUBCASE("an unknown split") {
    FlakyInstance f;
    CHECK(f.create("validation") == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.host.last_error == "flaky: unknown split 'validation' (expected \"train\", \"val\" or \"test\")");
    CHECK(f.create(nullptr) == TP_ERR_INVALID_ARGUMENT);
  }
  SUBCASE("a dataset that does not declare kHasTestSplit refuses the test split") {
    FlakyInstance f;
    CHECK(f.create("test") == TP_ERR_UNSUPPORTED);
    CHECK(f.host.last_error.find("flaky: this dataset has no test split") == 0);
  }
  SUBCASE("NULL config and NULL out_self") {
    FlakyInstance f;
    CHECK(f.t.create(&f.host.host, nullptr, "train", &f.self) == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.host.last_error == "flaky: config view is NULL");
    CHECK(f.t.create(&f.host.host, &f.cfg.view, "train", nullptr) == TP_ERR_INVALID_ARGUMENT);
  }
}

TEST_CASE("dataset adapter: a failing get_sample hands over no field and releases what it made") {
  FlakyInstance f;
  REQUIRE(f.create() == TP_OK);
  tp_field_t out[4] = {};
  uint32_t count = 99;

  SUBCASE("the class throws after making two fields") {
    CHECK(f.t.get_sample(f.self, 3, nullptr, out, 4, &count) == TP_ERR_INTERNAL);
    CHECK(f.host.last_error == "flaky: cannot decode sample 3");
    CHECK(count == 0);
    CHECK(out[0].tensor == nullptr);
    CHECK(f.deleted() == 2);
  }
  SUBCASE("the fields do not fit: capacity is checked, both released") {
    CHECK(f.t.get_sample(f.self, 0, nullptr, out, 1, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.host.last_error == "flaky: capacity 1 < 2 fields");
    CHECK(count == 0);
    CHECK(out[0].tensor == nullptr);
    CHECK(f.deleted() == 2);
  }
  SUBCASE("no seed where the class needs one (a NULL context, or one older than `seed`)") {
    CHECK(f.t.get_sample(f.self, 4, nullptr, out, 4, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.host.last_error == "flaky: augmentation needs a tp_worker_ctx_t with a seed");
    tp_worker_ctx_t old{};
    old.struct_size = static_cast<uint32_t>(offsetof(tp_worker_ctx_t, seed));
    CHECK(f.t.get_sample(f.self, 4, &old, out, 4, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.deleted() == 4);
    tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, 7};
    REQUIRE(f.t.get_sample(f.self, 4, &ctx, out, 4, &count) == TP_OK);
    CHECK(count == 2);
    tp::cpp::release_fields(out, count);
    CHECK(f.deleted() == 6);
  }
  SUBCASE("an index out of range makes nothing") {
    CHECK(f.t.get_sample(f.self, 8, nullptr, out, 4, &count) == TP_ERR_OUT_OF_RANGE);
    CHECK(f.host.last_error == "flaky: index 8 is out of range (size 8)");
    CHECK(count == 0);
    CHECK(f.deleted() == 0);
  }
  SUBCASE("NULL outputs") {
    CHECK(f.t.get_sample(f.self, 0, nullptr, nullptr, 4, &count) == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.t.get_sample(f.self, 0, nullptr, out, 4, nullptr) == TP_ERR_INVALID_ARGUMENT);
    CHECK(f.deleted() == 0);
  }
  SUBCASE("success hands both over; the fields outlive the instance (PLG-13)") {
    REQUIRE(f.t.get_sample(f.self, 2, nullptr, out, 4, &count) == TP_OK);
    CHECK(count == 2);
    CHECK(std::string(out[0].name) == "a");
    CHECK(std::string(out[1].name) == "b");
    CHECK(f.deleted() == 0);
    f.t.destroy(f.self);
    f.self = nullptr;
    tp::cpp::release_fields(out, count);
    CHECK(f.deleted() == 2);
  }
}

TEST_CASE("dataset adapter: NULL instances are statuses, destroy(NULL) is a no-op") {
  const tp_dataset_v1_t& t = dataset_adapter_table_of(kFlaky);
  t.destroy(nullptr);
  uint64_t n = 0;
  CHECK(t.size(nullptr, &n) == TP_ERR_INVALID_ARGUMENT);
  tp_field_t out[2] = {};
  uint32_t count = 0;
  CHECK(t.get_sample(nullptr, 0, nullptr, out, 2, &count) == TP_ERR_INVALID_ARGUMENT);
  CHECK(dataset_adapter_table_of(kEpoch).set_epoch(nullptr, 1) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("dataset adapter: size, the split and set_epoch reach the class") {
  FakeHost host;
  FakeConfig cfg;
  cfg.values = {{"unused", int64_t{0}}};
  const tp_dataset_v1_t& t = dataset_adapter_table_of(kEpoch);
  void* self = nullptr;
  REQUIRE(t.create(&host.host, &cfg.view, "val", &self) == TP_OK);
  uint64_t n = 0;
  CHECK(t.size(self, &n) == TP_OK);
  CHECK(n == 3);
  CHECK(t.set_epoch(self, 2) == TP_OK);
  tp_field_t out[2] = {};
  uint32_t count = 0;
  REQUIRE(t.get_sample(self, 1, nullptr, out, 2, &count) == TP_OK);
  CHECK(*static_cast<const int64_t*>(out[0].tensor->dl_tensor.data) == 21);
  CHECK(*static_cast<const uint8_t*>(out[1].tensor->dl_tensor.data) == 0);  // the val split
  tp::cpp::release_fields(out, count);
  CHECK(t.set_epoch(self, 10) == TP_ERR_OUT_OF_RANGE);
  CHECK(host.last_error == "with_epoch: epoch 10");
  t.destroy(self);
}

namespace {

/// Declares "image" available encoded on train and unavailable on val (its reason a member of its
/// own, as a plugin that names the key in it keeps it); get_sample follows the context.
class Encoded {
 public:
  explicit Encoded(const tp::cpp::DatasetArgs& args)
      : train_(args.train()), reason_("encoded: `jitter` transforms decoded pixels on split " + std::string(args.split_name)) {}
  uint64_t size() const { return 2; }
  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    if (train_ && ctx.encoded_images()) {
      out.add("image", std::vector<uint8_t>{0xFF, 0xD8, 0xFF, static_cast<uint8_t>(index)}, {4});
      out.add("image_box", std::vector<int32_t>{0, 0, 2, 2, 1, 2, 2}, {7});
    } else {
      out.add("image", std::vector<float>(12, 0.5f), {3, 2, 2});
    }
    out.add("label", std::vector<int64_t>{static_cast<int64_t>(index)}, {});
  }
  std::vector<tp_encoded_image_t> encoded_images() const {
    if (!train_) return {tp::cpp::unavailable_encoded_image("image", reason_.c_str())};
    return {tp::cpp::encoded_image("image", 2, 2, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, true)};
  }

 private:
  bool train_;
  std::string reason_;
};

const tp_descriptor_t kEncodedDescriptor =
    tp::cpp::dataset_descriptor("org.torchhost.test.encoded", "1.0.0", "encoded images", kNoKeys);
const tp::cpp::Component kEncoded = tp::cpp::dataset_component<Encoded, kEncodedDescriptor>();

}  // namespace

TEST_CASE("dataset adapter: encoded_images (ABI 1.11) is lent until destroy; get_sample sees ctx->encoded_images") {
  const tp_dataset_v1_t& t = dataset_adapter_table_of(kEncoded);
  REQUIRE((t.encoded_images != nullptr));
  CHECK((dataset_adapter_table_of(kFlaky).encoded_images == nullptr));  // Flaky declares none
  FakeHost host;
  FakeConfig cfg;
  cfg.values = {{"unused", int64_t{0}}};
  void* train = nullptr;
  void* val = nullptr;
  REQUIRE(t.create(&host.host, &cfg.view, "train", &train) == TP_OK);
  REQUIRE(t.create(&host.host, &cfg.view, "val", &val) == TP_OK);

  const tp_encoded_image_t* images = nullptr;
  uint32_t n = 0;
  REQUIRE(t.encoded_images(train, &images, &n) == TP_OK);
  REQUIRE(n == 1);
  CHECK(images[0].struct_size == sizeof(tp_encoded_image_t));
  CHECK(images[0].available == 1);
  CHECK(std::string(images[0].name) == "image");
  CHECK(images[0].reason == nullptr);
  CHECK(images[0].out_height == 2);
  CHECK(images[0].out_width == 2);
  CHECK(images[0].mean[1] == 0.456f);
  CHECK(images[0].std[2] == 0.225f);
  CHECK(images[0].channels_last == 1);
  REQUIRE(t.encoded_images(val, &images, &n) == TP_OK);
  REQUIRE(n == 1);
  CHECK(images[0].available == 0);
  CHECK(std::string(images[0].reason) == "encoded: `jitter` transforms decoded pixels on split val");
  CHECK(t.encoded_images(val, nullptr, &n) == TP_ERR_INVALID_ARGUMENT);
  CHECK(host.last_error == "encoded: out_images or out_count is NULL");

  tp_field_t out[4] = {};
  uint32_t count = 0;
  const auto image_dtype = [&](const tp_worker_ctx_t* ctx) {
    REQUIRE(t.get_sample(train, 1, ctx, out, 4, &count) == TP_OK);
    const DLDataType dtype = out[0].tensor->dl_tensor.dtype;
    const uint32_t fields = count;
    tp::cpp::release_fields(out, count);
    CHECK(fields == (dtype.code == kDLUInt ? 3u : 2u));
    return dtype.code;
  };
  tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, 7};
  CHECK(ctx.encoded_images == 0);  // a positional context of ABI <= 1.10 asks for pixels
  CHECK(image_dtype(&ctx) == kDLFloat);
  ctx.encoded_images = 1;
  CHECK(image_dtype(&ctx) == kDLUInt);
  // A 1.10 host's context ends before the member: whatever lies there is not read (PLG-2).
  ctx.struct_size = static_cast<uint32_t>(offsetof(tp_worker_ctx_t, encoded_images));
  CHECK(image_dtype(&ctx) == kDLFloat);
  CHECK(image_dtype(nullptr) == kDLFloat);
  t.destroy(train);
  t.destroy(val);
}

namespace {

/// Stops at epoch `stop`; throws at epoch 99.
class StopAt {
 public:
  explicit StopAt(const tp::cpp::CallbackArgs& args) : stop_(static_cast<uint64_t>(args.config.get_int_in("stop", 1, 50))) {
    args.log(TP_LOG_INFO, "stop_at: created");
  }
  uint32_t on_event(const tp_event_t& event) {
    if (event.epoch == 99) throw std::runtime_error("stop_at: epoch 99 is cursed");
    return event.kind == TP_EVENT_EPOCH_END && event.epoch + 1 >= stop_ ? uint32_t{TP_REQUEST_STOP} : 0u;
  }

 private:
  uint64_t stop_;
};

const tp_config_key_t kStopKeys[] = {{sizeof(tp_config_key_t), "stop", TP_CFG_INT, "2", "epochs before the stop"}};
const tp_descriptor_t kStopDescriptor =
    tp::cpp::callback_descriptor("org.torchhost.test.stop_at", "1.0.0", "stops", kStopKeys);
const tp::cpp::Component kStop = tp::cpp::callback_component<StopAt, kStopDescriptor>();

}  // namespace

TEST_CASE("callback adapter: requests, a throwing on_event, NULL arguments") {
  const auto& t = *static_cast<const tp_callback_v1_t*>(kStop.table);
  CHECK(t.struct_size == sizeof(tp_callback_v1_t));
  CHECK(kStopDescriptor.kind == TP_KIND_CALLBACK);
  CHECK(kStopDescriptor.tier == TP_TIER_S);
  FakeHost host;
  FakeConfig cfg;
  cfg.values = {{"stop", int64_t{2}}};
  void* self = nullptr;
  REQUIRE(t.create(&host.host, &cfg.view, &self) == TP_OK);
  CHECK(host.logs == std::vector<std::string>{"stop_at: created"});
  tp_event_t event{sizeof(tp_event_t), TP_EVENT_EPOCH_END, 10, 0, 0.1, nullptr, 0, nullptr};
  uint32_t requests = 0;
  CHECK(t.on_event(self, &event, &requests) == TP_OK);
  CHECK(requests == 0);
  event.epoch = 1;
  CHECK(t.on_event(self, &event, &requests) == TP_OK);
  CHECK(requests == TP_REQUEST_STOP);
  event.epoch = 99;
  CHECK(t.on_event(self, &event, &requests) == TP_ERR_INTERNAL);
  CHECK(host.last_error == "stop_at: epoch 99 is cursed");
  CHECK(t.on_event(self, nullptr, &requests) == TP_ERR_INVALID_ARGUMENT);
  CHECK(t.on_event(nullptr, &event, &requests) == TP_ERR_INVALID_ARGUMENT);
  t.destroy(self);
  t.destroy(nullptr);
  cfg.values["stop"] = int64_t{0};
  CHECK(t.create(&host.host, &cfg.view, &self) == TP_ERR_CONFIG);
  CHECK(host.last_error == "stop_at: stop = 0 is outside [1, 50]");
  CHECK(self == nullptr);
}

TEST_CASE("WorkerContext: seed(purpose) is the sample seed whatever the purpose; stream_seed(name) derives a stream") {
  tp_worker_ctx_t raw{};
  raw.struct_size = sizeof raw;
  raw.seed = 12345;
  const tp::cpp::WorkerContext ctx(&raw, "probe");
  // PLG-8: what seed() returns never changes (existing plugins' samples stay bit-identical).
  CHECK(ctx.seed("view_0") == 12345);
  CHECK(ctx.seed("view_1") == 12345);
  CHECK(ctx.stream_seed("view_0") == 0x7712A79E299AB966ULL);  // derived_seed(12345, "view_0"), pinned
  CHECK(ctx.stream_seed("view_0") == tp::cpp::derived_seed(12345, "view_0"));
  CHECK(ctx.stream_seed("view_1") != ctx.stream_seed("view_0"));
  CHECK(ctx.stream_seed("view_1") == ctx.stream_seed("view_1"));
  const tp::cpp::WorkerContext none(nullptr, "probe");
  try {
    (void)none.stream_seed("view_0");
    FAIL_CHECK("expected a Failure");
  } catch (const tp::cpp::Failure& e) {
    CHECK(std::string(e.what()) == "probe: view_0 needs a tp_worker_ctx_t with a seed");
  }
}
