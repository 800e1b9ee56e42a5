#include "tp/framework/config/config_view.h"

#include "tp/framework/config/value.h"
#include "tp/framework/util/abi_guard.h"

#include <utility>

namespace tp {
namespace {

const ConfigView& self_of(const void* self) { return *static_cast<const ConfigView*>(self); }

// Nothing may unwind into the plugin (util/abi_guard.h). Building a message can throw
// (std::bad_alloc), and so can the failure sink; either becomes a status.
template <typename Body>
tp_status guarded(Body&& body) noexcept {
  return detail::guard_status(std::forward<Body>(body), [](const char*) {});
}

}  // namespace

ConfigView::ConfigView(toml::table table, std::string component_id, FailFn fail)
    : table_(std::move(table)), component_id_(std::move(component_id)), fail_(std::move(fail)) {
  if (!fail_) fail_ = [](tp_status code, const std::string&) { return code; };
  view_.struct_size = sizeof(tp_config_t);
  view_.self = this;
  view_.get_bool = &ConfigView::get_bool;
  view_.get_int = &ConfigView::get_int;
  view_.get_float = &ConfigView::get_float;
  view_.get_string = &ConfigView::get_string;
  view_.get_array_size = &ConfigView::get_array_size;
  view_.get_int_at = &ConfigView::get_int_at;
  view_.get_float_at = &ConfigView::get_float_at;
  view_.get_string_at = &ConfigView::get_string_at;
}

const toml::node* ConfigView::lookup(const char* key, const void* out, const char* getter,
                                     tp_status* status) const {
  const std::string prefix = "component '" + component_id_ + "': config->" + getter + "(";
  if (key == nullptr || out == nullptr) {
    *status = fail_(TP_ERR_INVALID_ARGUMENT,
                    prefix + (key ? key : "NULL") +
                        "): the key and the out-parameter must not be NULL");
    return nullptr;
  }
  const toml::node* node = table_.get(key);
  if (node == nullptr) {
    // Validation filled every declared key, so a missing key was never declared: a plugin bug.
    *status = fail_(TP_ERR_CONFIG, prefix + "\"" + key + "\"): the key is not declared in the "
                                       "component's config schema; declare it in the descriptor's "
                                       "tp_config_key_t table");
  }
  return node;
}

const toml::node* ConfigView::lookup_at(const char* key, uint32_t index, const void* out,
                                        const char* getter, tp_status* status) const {
  const toml::node* node = lookup(key, out, getter, status);
  if (node == nullptr) return nullptr;
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    *status = wrong_type(key, *node, "an array", getter);
    return nullptr;
  }
  if (index >= array->size()) {
    *status = fail_(TP_ERR_OUT_OF_RANGE,
                    "component '" + component_id_ + "': config->" + getter + "(\"" + key + "\", " +
                        std::to_string(index) + "): index past the end of an array of " +
                        std::to_string(array->size()) + "; read the length with get_array_size");
    return nullptr;
  }
  return array->get(index);
}

tp_status ConfigView::wrong_type(const char* key, const toml::node& node, const char* expected,
                                 const char* getter) const {
  return fail_(TP_ERR_CONFIG, "component '" + component_id_ + "': config->" + getter + "(\"" +
                                  key + "\"): the value is " + describe_node(node) + ", not " +
                                  expected + "; use the getter of the type the schema declares");
}

tp_status ConfigView::get_bool(const void* self, const char* key, bool* out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup(key, out_value, "get_bool", &status);
    if (node == nullptr) return status;
    if (!node->is_boolean()) return view.wrong_type(key, *node, "a boolean", "get_bool");
    *out_value = node->as_boolean()->get();
    return TP_OK;
  });
}

tp_status ConfigView::get_int(const void* self, const char* key, int64_t* out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup(key, out_value, "get_int", &status);
    if (node == nullptr) return status;
    if (!node->is_integer()) return view.wrong_type(key, *node, "an integer", "get_int");
    *out_value = node->as_integer()->get();
    return TP_OK;
  });
}

tp_status ConfigView::get_float(const void* self, const char* key, double* out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup(key, out_value, "get_float", &status);
    if (node == nullptr) return status;
    if (!node->is_number()) return view.wrong_type(key, *node, "a float", "get_float");
    *out_value = node->value<double>().value_or(0.0);
    return TP_OK;
  });
}

tp_status ConfigView::get_string(const void* self, const char* key, const char** out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup(key, out_value, "get_string", &status);
    if (node == nullptr) return status;
    if (!node->is_string()) return view.wrong_type(key, *node, "a string", "get_string");
    *out_value = node->as_string()->get().c_str(); // points into table_, valid while the view is
    return TP_OK;
  });
}

tp_status ConfigView::get_array_size(const void* self, const char* key, uint32_t* out_count) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup(key, out_count, "get_array_size", &status);
    if (node == nullptr) return status;
    if (!node->is_array()) return view.wrong_type(key, *node, "an array", "get_array_size");
    *out_count = static_cast<uint32_t>(node->as_array()->size());
    return TP_OK;
  });
}

tp_status ConfigView::get_int_at(const void* self, const char* key, uint32_t index,
                                 int64_t* out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup_at(key, index, out_value, "get_int_at", &status);
    if (node == nullptr) return status;
    if (!node->is_integer()) return view.wrong_type(key, *node, "an integer", "get_int_at");
    *out_value = node->as_integer()->get();
    return TP_OK;
  });
}

tp_status ConfigView::get_float_at(const void* self, const char* key, uint32_t index,
                                   double* out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup_at(key, index, out_value, "get_float_at", &status);
    if (node == nullptr) return status;
    if (!node->is_number()) return view.wrong_type(key, *node, "a float", "get_float_at");
    *out_value = node->value<double>().value_or(0.0);
    return TP_OK;
  });
}

tp_status ConfigView::get_string_at(const void* self, const char* key, uint32_t index,
                                    const char** out_value) noexcept {
  return guarded([&]() -> tp_status {
    if (self == nullptr) return TP_ERR_INVALID_ARGUMENT;
    const ConfigView& view = self_of(self);
    tp_status status = TP_OK;
    const toml::node* node = view.lookup_at(key, index, out_value, "get_string_at", &status);
    if (node == nullptr) return status;
    if (!node->is_string()) return view.wrong_type(key, *node, "a string", "get_string_at");
    *out_value = node->as_string()->get().c_str();
    return TP_OK;
  });
}

}  // namespace tp
