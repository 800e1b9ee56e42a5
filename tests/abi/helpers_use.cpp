// Expands every macro and instantiates every template of the C++ helpers, so their bodies are
// checked under the strict flags too (a header that is only included proves little about
// templates and macros).
#include <cstdint>
#include <utility>
#include <vector>

#include "tp/cpp/callback_adapter.h"
#include "tp/cpp/config.h"
#include "tp/cpp/dataset_adapter.h"
#include "tp/cpp/dlpack.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/value_names.h"
#include "tp/tp.h"

namespace {

tp_status use_create(const tp_host_t* host, const tp_config_t* cfg, const char*, void** out_self) {
  TP_GUARD(host, {
    const tp::cpp::ConfigReader reader(cfg);
    (void)reader.get_bool("b");
    (void)reader.get_int("i");
    (void)reader.get_float("f");
    (void)reader.get_string("s");
    (void)reader.get_int_array("ia");
    (void)reader.get_float_array("fa");
    (void)reader.get_string_array("sa");
    *out_self = nullptr;
    return TP_OK;
  });
}
void use_destroy(void*) {}
tp_status use_size(const void*, uint64_t* out_count) {
  TP_GUARD(tp::cpp::plugin_host(), {
    *out_count = 1;
    return TP_OK;
  });
}
tp_status use_get_sample(const void*, uint64_t index, const tp_worker_ctx_t*, tp_field_t* out_fields,
                         uint32_t capacity, uint32_t* out_count) {
  TP_GUARD(tp::cpp::plugin_host(), {
    if (capacity < 6) throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, "capacity");
    out_fields[0] = tp::cpp::make_field("f32", std::vector<float>{1.0f, 2.0f}, {2});
    out_fields[1] = tp::cpp::make_field("f64", std::vector<double>{1.0}, {});
    out_fields[2] = tp::cpp::make_field("i64", std::vector<int64_t>{static_cast<int64_t>(index)}, {1});
    out_fields[3] = tp::cpp::make_field("i32", std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
    out_fields[4] = tp::cpp::make_field("u8", std::vector<uint8_t>{1}, {1, 1});
    out_fields[5] = tp::cpp::make_field("i8", std::vector<int8_t>{1}, {1});
    *out_count = 6;
    tp::cpp::release_fields(out_fields, *out_count);
    return TP_OK;
  });
}

const tp_dataset_v1_t kTable = {sizeof(tp_dataset_v1_t), &use_create, &use_destroy, &use_size, &use_get_sample, nullptr, nullptr, nullptr};
const tp_descriptor_t kDescriptor = {sizeof(tp_descriptor_t), "org.test.use", TP_KIND_DATASET, TP_TIER_S, "1.0.0", "",
                                     nullptr, 0, nullptr, 0, 0};
// The adapters, instantiated with every optional member.
class UseDataset {
 public:
  explicit UseDataset(const tp::cpp::DatasetArgs& args)
      : size_(static_cast<uint64_t>(args.config.get_int_in("i", 1, 10))), scale_(args.config.get_float_in("f", 0.0, 1.0)) {
    args.log(TP_LOG_INFO, args.split_name);
  }
  uint64_t size() const { return size_; }
  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    const uint64_t seed = ctx.has_seed() ? ctx.seed("noise") : 0;
    out.add("x", std::vector<double>{scale_ * static_cast<double>(index + seed)}, {1});
    if (ctx.encoded_images()) {
      out.add("image", std::vector<uint8_t>{0xFF, 0xD8}, {2});
      out.add("image_box", std::vector<int32_t>{0, 0, 1, 1, 0, 1, 1}, {7});
    } else {
      out.add("image", std::vector<float>(3, 0.0f), {3, 1, 1});
    }
  }
  void set_epoch(uint64_t epoch) { size_ = epoch + 1; }
  std::vector<tp_encoded_image_t> encoded_images() const {
    return {tp::cpp::encoded_image("image", 1, 1, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}, false),
            tp::cpp::unavailable_encoded_image("depth", "`jitter` transforms decoded pixels")};
  }

 private:
  uint64_t size_;
  double scale_;
};
class UseCallback {
 public:
  explicit UseCallback(const tp::cpp::CallbackArgs& args) { args.log(TP_LOG_INFO, args.component); }
  uint32_t on_event(const tp_event_t& event) { return event.kind == TP_EVENT_EPOCH_END ? uint32_t{TP_REQUEST_STOP} : 0u; }
};
const tp_config_key_t kKeys[] = {{sizeof(tp_config_key_t), "i", TP_CFG_INT, "1", "i"}};
const tp_descriptor_t kAdaptedDataset = tp::cpp::dataset_descriptor("org.test.adapted", "1.0.0", "", kKeys);
const tp_descriptor_t kAdaptedCallback = tp::cpp::callback_descriptor("org.test.adapted_callback", "1.0.0", "", kKeys);

// Per-class value names, built in a constant evaluation under the strict flags.
constexpr tp::cpp::IndexedValueNames<12> kValueNames("value_");
static_assert(kValueNames[11][6] == '1' && kValueNames[11][8] == '\0');

const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_DATASET_V1, &kTable},
    tp::cpp::dataset_component<UseDataset, kAdaptedDataset>(),
    tp::cpp::callback_component<UseCallback, kAdaptedCallback>(),
};

}  // namespace

TP_DEFINE_PLUGIN("use", TP_STABLE_BUILD_INFO_INIT, kComponents)
