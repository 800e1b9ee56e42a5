// Test support for the model zoo tests: one model instance of a zoo plugin driven through its C
// ABI (tp::test::plugin loads build/plugins/<library>.so), and the project venv's Python.
//
// Include this first: LibTorch must come before doctest (plugin_harness.h says why).
#pragma once

#include "support/autograd_graph.h"
#include "support/plugin_harness.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "integration/host_runner.h"
#include "support/test_paths.h"

namespace tp::test {

/// A model created from `config` (the caller gives every key; see with_defaults), after
/// at::manual_seed(seed). Creation failures are REQUIREd unless `expect_ok` is false, in which
/// case `status` holds the code and `error()` the message.
struct ZooModel {
  LoadedPlugin& p;
  const tp_model_v1_t* t = nullptr;
  void* self = nullptr;
  tp_status status = TP_OK;

  ZooModel(const char* library, const char* id, const std::map<std::string, FakeConfig::Value>& config,
           uint64_t seed = 1, bool expect_ok = true)
      : p(plugin(library)) {
    t = &p.table<tp_model_v1_t>(id, TP_IFACE_MODEL_V1);
    FakeConfig cfg;
    cfg.values = config;
    at::manual_seed(seed);
    status = t->create(&p.host.host, &cfg.view, &self);
    if (expect_ok) REQUIRE_MESSAGE(status == TP_OK, p.host.last_error);
  }
  ~ZooModel() { t->destroy(self); }
  ZooModel(const ZooModel&) = delete;
  ZooModel& operator=(const ZooModel&) = delete;

  const std::string& error() const { return p.host.last_error; }

  /// Every output by name; REQUIREs success.
  std::map<std::string, at::Tensor> forward(Fields& inputs) {
    std::map<std::string, at::Tensor> result;
    REQUIRE_MESSAGE(try_forward(inputs, result) == TP_OK, p.host.last_error);
    return result;
  }
  /// forward's status; outputs into `result`.
  tp_status try_forward(Fields& inputs, std::map<std::string, at::Tensor>& result) {
    // 16: FCOS in eval mode returns 11 outputs (its head, anchors and ragged detections).
    tp_named_tensor_t out[16];
    uint32_t n = 0;
    const tp_status s = t->forward(self, inputs.view(), inputs.size(), out, 16, &n);
    for (uint32_t i = 0; i < n; ++i) result[out[i].name] = adopt(p, out[i].tensor);
    return s;
  }
  void train(bool on) { REQUIRE_MESSAGE(t->set_training(self, on) == TP_OK, p.host.last_error); }
  std::vector<StateEntry> state() { return visit_all(t->visit_state, self); }
  /// Parameters (not buffers) summed.
  int64_t parameter_count() {
    int64_t n = 0;
    for (const auto& e : state())
      if (!e.is_buffer) n += tensor_of(e.handle).numel();
    return n;
  }
  at::Tensor named(const std::string& name) {
    for (const auto& e : state())
      if (e.name == name) return tensor_of(e.handle);
    FAIL("no state entry " << name);
    throw;  // unreachable: FAIL throws
  }
};

/// Runs `tp::test::python() <script> <args>` from the source directory; REQUIREs exit 0 and returns
/// its output.
inline std::string run_python(const std::string& script, const std::string& args) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()), "the oracle needs the project venv: " << tp::test::python());
  const HostRun run = run_shell(std::string("'") + tp::test::python() + "' " + script + " " + args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return run.output;
}

/// A plain dict of tensors that Python wrote with torch.save (torch::pickle_load reads that, not
/// an OrderedDict); REQUIREs the file.
inline std::map<std::string, at::Tensor> load_python_dict(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), file.string());
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> out;
  for (const auto& item : torch::jit::pickle_load(bytes).toGenericDict())
    out[item.key().toStringRef()] = item.value().toTensor();
  return out;
}

/// Copies `weights` (a Python state_dict) into the model's state through the handles
/// visit_state lends, strictly by name and shape, as train.init_weights does.
inline void load_weights(ZooModel& m, const std::map<std::string, at::Tensor>& weights) {
  const auto state = m.state();
  REQUIRE(weights.size() == state.size());
  at::NoGradGuard no_grad;
  for (const auto& e : state) {
    CAPTURE(e.name);
    REQUIRE(weights.count(e.name) == 1);
    REQUIRE(weights.at(e.name).sizes() == tensor_of(e.handle).sizes());
    tensor_of(e.handle).copy_(weights.at(e.name));
  }
}

/// One training step of a fresh `library`/`id` model with activation checkpointing on or off:
/// forward on a [2, 3, size, size] batch after at::manual_seed(42), cross-entropy over 10
/// classes, backward. Returns the logits, then every parameter's gradient and every buffer in
/// state order, for comparing the two settings bit for bit; CHECKs that checkpointing shows in
/// the graph exactly when on.
inline std::vector<at::Tensor> checkpointing_step(const char* library, const char* id,
                                                  const std::map<std::string, FakeConfig::Value>& config,
                                                  bool checkpointing, int64_t size) {
  ZooModel m(library, id, config);
  if (checkpointing) REQUIRE_MESSAGE(m.t->set_activation_checkpointing(m.self, true) == TP_OK, m.error());
  m.train(true);
  at::manual_seed(42);
  Fields in = {{"image", at::randn({2, 3, size, size})}, {"label", at::randint(0, 10, {2}, at::kLong)}};
  const at::Tensor logits = m.forward(in).at("logits");
  CHECK(has_checkpoint_node(logits) == checkpointing);
  at::cross_entropy_loss(logits, in.items[1].second).backward();
  std::vector<at::Tensor> out = {logits.detach()};
  for (const auto& e : m.state()) {
    const at::Tensor& t = tensor_of(e.handle);
    if (e.is_buffer) {
      out.push_back(t.clone());
    } else {
      REQUIRE_MESSAGE(t.grad().defined(), e.name);
      out.push_back(t.grad().clone());
    }
  }
  return out;
}

/// How many of `m`'s buffers (BatchNorm statistics) one forward of a random [2, 3, 32, 32]
/// `image` changes, and how many buffers there are: {moved, total}. `m` is left in training mode.
inline std::pair<size_t, size_t> buffers_moved_by_forward(ZooModel& m) {
  m.train(true);
  std::vector<at::Tensor> before;
  for (const auto& e : m.state())
    if (e.is_buffer) before.push_back(tensor_of(e.handle).clone());
  Fields in = {{"image", at::randn({2, 3, 32, 32})}};
  m.forward(in);
  size_t i = 0, moved = 0;
  for (const auto& e : m.state())
    if (e.is_buffer) moved += at::equal(before[i++], tensor_of(e.handle)) ? 0 : 1;
  return {moved, before.size()};
}

/// max |a - b| / max(max |b|, 1e-12): the relative size of the largest difference.
inline double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / scale;
}

}  // namespace tp::test
