// The read-only C view (tp_config_t, plugin_api/include/tp/config.h) of one validated component
// table, handed to a plugin's create().
#pragma once

#include <functional>
#include <string>

#include <toml++/toml.h>

#include "tp/config.h"

namespace tp {

/// Owns a copy of a validated component table and implements every tp_config_t getter over it.
/// A getter asked for an undeclared key, or for a key of another type, reports the problem through
/// the failure sink and returns its status (TP_ERR_CONFIG); an index past the end of an array
/// gives TP_ERR_OUT_OF_RANGE, a NULL key or out-parameter TP_ERR_INVALID_ARGUMENT. Getters are
/// const and may run on any thread; pointers they return are valid while the view lives.
/// Not copyable or movable: view()->self points at this object.
/// Example:
///   ConfigView view(cfg.model.options, cfg.model.component,
///                   [&](tp_status code, const std::string& msg) {
///                     return errors.fail(code, msg);
///                   });
///   model_iface->create(host, view.view(), &self);
class ConfigView {
 public:
  /// Records `message` for the plugin's caller and returns `code` (the framework passes one that
  /// writes its per-thread error store).
  using FailFn = std::function<tp_status(tp_status code, const std::string& message)>;

  /// `table` must already be validated (validate_component). `component_id` names the component
  /// in messages.
  ConfigView(toml::table table, std::string component_id, FailFn fail);
  ConfigView(const ConfigView&) = delete;
  ConfigView& operator=(const ConfigView&) = delete;

  /// The C view; borrowed, valid while this object lives.
  const tp_config_t* view() const noexcept { return &view_; }

  /// The table the getters read.
  const toml::table& table() const noexcept { return table_; }

 private:
  /* Getter implementations (tp_config_t function pointers); `self` is the ConfigView. */
  static tp_status get_bool(const void* self, const char* key, bool* out_value) noexcept;
  static tp_status get_int(const void* self, const char* key, int64_t* out_value) noexcept;
  static tp_status get_float(const void* self, const char* key, double* out_value) noexcept;
  static tp_status get_string(const void* self, const char* key, const char** out_value) noexcept;
  static tp_status get_array_size(const void* self, const char* key, uint32_t* out_count) noexcept;
  static tp_status get_int_at(const void* self, const char* key, uint32_t index,
                              int64_t* out_value) noexcept;
  static tp_status get_float_at(const void* self, const char* key, uint32_t index,
                                double* out_value) noexcept;
  static tp_status get_string_at(const void* self, const char* key, uint32_t index,
                                 const char** out_value) noexcept;

  /// The node at `key`, or nullptr after reporting a missing key or a NULL argument in `*status`.
  const toml::node* lookup(const char* key, const void* out, const char* getter,
                           tp_status* status) const;
  /// Element `index` of the array at `key`, or nullptr after reporting the problem in `*status`.
  const toml::node* lookup_at(const char* key, uint32_t index, const void* out, const char* getter,
                              tp_status* status) const;
  /// Reports that `key` holds something other than `expected`; returns TP_ERR_CONFIG.
  tp_status wrong_type(const char* key, const toml::node& node, const char* expected,
                       const char* getter) const;

  toml::table table_;
  std::string component_id_;
  FailFn fail_;
  tp_config_t view_{};
};

}  // namespace tp
