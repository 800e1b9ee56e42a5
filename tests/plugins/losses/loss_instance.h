// A basic_losses component driven through its C ABI, for the loss tests.
#pragma once

#include "support/plugin_harness.h"

namespace tp::test {

/// A loss instance with the descriptor's defaults plus `overrides`; destroyed at scope end.
struct Loss {
  LoadedPlugin& p = plugin("basic_losses");
  const tp_loss_v1_t* t = nullptr;
  void* self = nullptr;

  explicit Loss(const char* id, std::map<std::string, FakeConfig::Value> overrides = {}) {
    t = &p.table<tp_loss_v1_t>(id, TP_IFACE_LOSS_V1);
    FakeConfig cfg;
    fill_defaults(cfg, p.descriptor(id));
    for (auto& [k, v] : overrides) cfg.values[k] = v;
    REQUIRE_MESSAGE(t->create(&p.host.host, &cfg.view, &self) == TP_OK, p.host.last_error);
  }
  ~Loss() { t->destroy(self); }
  Loss(const Loss&) = delete;
  Loss& operator=(const Loss&) = delete;

  /// {sum, count}; both checked to be 0-dim.
  std::pair<at::Tensor, at::Tensor> forward(Fields& outputs, Fields& targets) {
    tp_tensor sum = nullptr, count = nullptr;
    REQUIRE_MESSAGE(t->forward(self, outputs.view(), outputs.size(), targets.view(), targets.size(), &sum, &count) == TP_OK,
                    p.host.last_error);
    std::pair<at::Tensor, at::Tensor> r{adopt(p, sum), adopt(p, count)};
    CHECK(r.first.dim() == 0);
    CHECK(r.second.dim() == 0);
    return r;
  }

  /// The named terms (ABI 1.3) of the last forward, as name -> detached sum.
  std::map<std::string, at::Tensor> terms() {
    REQUIRE((t->terms != nullptr));
    tp_named_tensor_t named[8] = {};
    uint32_t n = 0;
    REQUIRE_MESSAGE(t->terms(self, named, 8, &n) == TP_OK, p.host.last_error);
    std::map<std::string, at::Tensor> out;
    for (uint32_t i = 0; i < n; ++i) out[named[i].name] = adopt(p, named[i].tensor);
    return out;
  }
};

/// The value of a 0-dim tensor (syncs).
inline double value(const at::Tensor& t) { return t.item<double>(); }

}  // namespace tp::test
