// torchhost C++ helpers for plugin authors: typed reading of a component's config.
//
// The host has already validated the table against the component's schema and filled in defaults,
// so these getters fail only when a key was never declared: they throw tp::cpp::Failure with
// TP_ERR_CONFIG, which TP_GUARD turns into a status. The *_in getters also check a range the
// schema cannot express. Example:
//   tp::cpp::ConfigReader cfg(raw_cfg, "shapes");
//   int64_t classes = cfg.get_int("num_classes");
//   int64_t side = cfg.get_int_in("image_size", 16, 1024);  // "shapes: image_size = 8 is outside [16, 1024]"
//   std::vector<std::string> kinds = cfg.get_string_array("kinds");
// and the schema's entries, one config_key() each:
//   const tp_config_key_t kKeys[] = {tp::cpp::config_key("image_size", TP_CFG_INT, "32", "side in pixels")};
#ifndef TP_CPP_CONFIG_H
#define TP_CPP_CONFIG_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tp/config.h"
#include "tp/cpp/guard.h"

namespace tp::cpp {

/// One entry of a component's config schema (PLG-6): the key `name`, its TP_CFG_* `type`, its
/// default as a TOML literal ("10", "0.5", "\"relu\"", "[1, 2]"; nullptr when the key is required)
/// and one line of `help`. Static strings.
constexpr tp_config_key_t config_key(const char* name, int32_t type, const char* default_value,
                                     const char* help) noexcept {
  return {sizeof(tp_config_key_t), name, type, default_value, help};
}

/// Borrowing wrapper over tp_config_t; valid only while the view is (during create()).
class ConfigReader {
 public:
  /// `component` (static storage, e.g. "shapes"), when given, prefixes the messages it throws.
  explicit ConfigReader(const tp_config_t* cfg, const char* component = nullptr) : cfg_(cfg), component_(component) {
    if (cfg_ == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, prefix() + "config view is NULL");
  }

  bool get_bool(const char* key) const {
    bool v = false;
    check(cfg_->get_bool(cfg_->self, key, &v), key);
    return v;
  }
  int64_t get_int(const char* key) const {
    int64_t v = 0;
    check(cfg_->get_int(cfg_->self, key, &v), key);
    return v;
  }
  double get_float(const char* key) const {
    double v = 0;
    check(cfg_->get_float(cfg_->self, key, &v), key);
    return v;
  }
  std::string get_string(const char* key) const {
    const char* v = nullptr;
    check(cfg_->get_string(cfg_->self, key, &v), key);
    return v != nullptr ? std::string(v) : std::string();
  }
  /// get_int(key), refused with TP_ERR_CONFIG unless lo <= value <= hi.
  int64_t get_int_in(const char* key, int64_t lo, int64_t hi) const {
    const int64_t v = get_int(key);
    if (v < lo || v > hi) out_of_range(key, std::to_string(v), std::to_string(lo), std::to_string(hi));
    return v;
  }
  /// get_float(key), refused with TP_ERR_CONFIG unless lo <= value <= hi (NaN is refused).
  double get_float_in(const char* key, double lo, double hi) const {
    const double v = get_float(key);
    if (!(v >= lo && v <= hi)) out_of_range(key, number(v), number(lo), number(hi));
    return v;
  }
  std::vector<int64_t> get_int_array(const char* key) const {
    std::vector<int64_t> out(size_of(key));
    for (uint32_t i = 0; i < out.size(); ++i) check(cfg_->get_int_at(cfg_->self, key, i, &out[i]), key);
    return out;
  }
  std::vector<double> get_float_array(const char* key) const {
    std::vector<double> out(size_of(key));
    for (uint32_t i = 0; i < out.size(); ++i) check(cfg_->get_float_at(cfg_->self, key, i, &out[i]), key);
    return out;
  }
  std::vector<std::string> get_string_array(const char* key) const {
    std::vector<std::string> out;
    const uint32_t n = size_of(key);
    for (uint32_t i = 0; i < n; ++i) {
      const char* v = nullptr;
      check(cfg_->get_string_at(cfg_->self, key, i, &v), key);
      out.emplace_back(v != nullptr ? v : "");
    }
    return out;
  }

 private:
  uint32_t size_of(const char* key) const {
    uint32_t n = 0;
    check(cfg_->get_array_size(cfg_->self, key, &n), key);
    return n;
  }
  [[noreturn]] void out_of_range(const char* key, const std::string& v, const std::string& lo,
                                 const std::string& hi) const {
    throw Failure(TP_ERR_CONFIG, prefix() + key + " = " + v + " is outside [" + lo + ", " + hi + "]");
  }
  std::string prefix() const { return component_ != nullptr ? std::string(component_) + ": " : std::string(); }
  static std::string number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
  }
  static void check(tp_status status, const char* key) {
    // The host already recorded the detailed message; this one names the key for plugin logs.
    if (status != TP_OK) throw Failure(status, std::string("cannot read config key '") + key + "'");
  }

  const tp_config_t* cfg_;
  const char* component_;
};

/// Throws Failure(TP_ERR_CONFIG, "<component>: <key> <what>, got <got>") unless `ok`: the form of
/// a refused option value (the component id first, then the key), e.g.
///   require_config(depth > 0, "org.example.net", "depth", "must be positive", std::to_string(depth));
inline void require_config(bool ok, const char* component, const char* key, const std::string& what,
                           const std::string& got) {
  if (!ok) throw Failure(TP_ERR_CONFIG, std::string(component) + ": " + key + " " + what + ", got " + got);
}

}  // namespace tp::cpp

#endif  // TP_CPP_CONFIG_H
