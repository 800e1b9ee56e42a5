// torchhost C++ helpers for plugin authors: typed reading of a component's config.
//
// The host has already validated the table against the component's schema and filled in defaults,
// so these getters fail only when a key was never declared: they throw tp::cpp::Failure with
// TP_ERR_CONFIG, which TP_GUARD turns into a status. Example:
//   tp::cpp::ConfigReader cfg(raw_cfg);
//   int64_t classes = cfg.get_int("num_classes");
//   std::vector<std::string> kinds = cfg.get_string_array("kinds");
#ifndef TP_CPP_CONFIG_H
#define TP_CPP_CONFIG_H

#include <cstdint>
#include <string>
#include <vector>

#include "tp/config.h"
#include "tp/cpp/guard.h"

namespace tp::cpp {

/// Borrowing wrapper over tp_config_t; valid only while the view is (during create()).
class ConfigReader {
 public:
  explicit ConfigReader(const tp_config_t* cfg) : cfg_(cfg) {
    if (cfg_ == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "config view is NULL");
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
  static void check(tp_status status, const char* key) {
    // The host already recorded the detailed message; this one names the key for plugin logs.
    if (status != TP_OK) throw Failure(status, std::string("cannot read config key '") + key + "'");
  }

  const tp_config_t* cfg_;
};

}  // namespace tp::cpp

#endif  // TP_CPP_CONFIG_H
