// PLG-9, "outputs of a failed call", from the host's side: whatever a plugin hands over before a
// call fails, or in a call whose result the host refuses, is released exactly once. Counted
// directly (tensor use counts, DLPack deleter calls), so the default build proves it; the
// sanitize preset's LSan run proves no handle leaks either.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/loss_proxy.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

#include "support/doctest_after_torch.h"
#include "support/test_paths.h"

namespace {

using namespace tp;

struct OwnershipHost {
  Logger logger;
  HostServices services{logger, ProcessPlace{}};
};

OwnershipHost& host() {
  static OwnershipHost h;  // outlives every library loaded with it
  return h;
}

std::shared_ptr<PluginLibrary> load(const std::string& name) {
  const auto file = (std::filesystem::path(tp::test::build_dir()) / "tests/unit/plugin_boundary/fixtures") / (name + ".so");
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(file), "not built: " << file);
  static std::map<std::string, std::shared_ptr<PluginLibrary>> loaded;
  auto& slot = loaded[name];
  if (!slot) slot = PluginLibrary::load(file, host().services);
  return slot;
}

ComponentEntry component(const std::shared_ptr<PluginLibrary>& library, const std::string& id) {
  for (const ComponentInfo& info : library->components())
    if (info.id == id) return ComponentEntry{&info, library};
  FAIL("no component " << id);
  return {};
}

template <typename Proxy>
std::unique_ptr<Proxy> make(const std::string& id, const std::string& mode) {
  return std::make_unique<Proxy>(component(load("half_fail_t"), id), ComponentConfig{id, "model", toml::table{{"mode", mode}}});
}

/// The message of the PluginError `call` throws (checked).
template <typename Call>
std::string plugin_error(Call&& call) {
  try {
    call();
  } catch (const PluginError& e) {
    return e.what();
  }
  FAIL_CHECK("expected a tp::PluginError");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("a model forward that fails after writing an output: the host releases the output") {
  auto model = make<ModelProxy>("org.test.half_fail_model", "fail_after_first");
  const at::Tensor input = at::ones({2, 3});
  const std::string message = plugin_error([&] { model->forward({{"x", input}}); });
  CHECK(contains(message, "failing after output 0"));
  CHECK(input.use_count() == 1);  // the plugin's new reference to it is gone
}

TEST_CASE("a model forward that returns TP_OK with a NULL output is refused, the others released") {
  auto model = make<ModelProxy>("org.test.half_fail_model", "null_output");
  const at::Tensor input = at::ones({2});
  const std::string message = plugin_error([&] { model->forward({{"x", input}}); });
  CHECK(contains(message, "output 1 of 2 NULL"));
  CHECK(input.use_count() == 1);
}

TEST_CASE("a model forward that returns two outputs of one name is refused, both released") {
  // Before, both were handed on and a lookup by name took the first, silently.
  auto model = make<ModelProxy>("org.test.half_fail_model", "dup_output");
  const at::Tensor input = at::ones({2});
  const std::string message = plugin_error([&] { model->forward({{"x", input}}); });
  CHECK(contains(message, "org.test.half_fail_model"));
  CHECK(contains(message, "returned output 'out' twice (outputs 0 and 1)"));
  CHECK(contains(message, "rename one"));
  // One sentence of the host's: no plugin status or "no message" template spliced into it.
  CHECK_FALSE(contains(message, "the plugin gave no message"));
  CHECK_FALSE(contains(message, "TP_ERR_INTERNAL"));
  CHECK(input.use_count() == 1);
}

TEST_CASE("a model output on another device than the model's is refused at the boundary, naming the model") {
  // Before, it failed later inside host code: "unexpected error" with LibTorch's backtrace.
  auto model = make<ModelProxy>("org.test.half_fail_model", "ok");
  model->to_device(c10::Device(c10::kCPU));
  const at::Tensor input = at::empty({2}, at::TensorOptions().device(c10::kMeta));  // the output aliases it
  const std::string message = plugin_error([&] { model->forward({{"x", input}}); });
  CHECK(contains(message, "plugin component 'org.test.half_fail_model'"));
  CHECK(contains(message, "returned output 'out' on meta while the model is on cpu"));
  CHECK(input.use_count() == 1);
}

TEST_CASE("a model create that returns TP_OK but no instance is refused at create, as the other kinds'") {
  // Before, the NULL instance went on to to_device and forward, which took the blame (or crashed).
  try {
    make<ModelProxy>("org.test.half_fail_model", "no_instance");
    FAIL("the proxy was created although create() gave no instance");
  } catch (const PluginError& e) {
    CHECK(contains(e.what(), "plugin component 'org.test.half_fail_model'"));
    CHECK(contains(e.what(), "failed in create for [model]: create returned TP_OK but no instance"));
  }
}

TEST_CASE("a config key's help is kept to one escaped line, as the component's description") {
  // plugins list --verbose printed it raw: ESC reached the terminal, a newline made an untagged line.
  const auto library = load("half_fail_s");
  const ComponentInfo& info = *component(library, "org.test.half_fail_dataset").info;
  const auto painted = std::find_if(info.schema.begin(), info.schema.end(), [](const KeySpec& key) {
    return key.path == "painted";
  });
  REQUIRE(painted != info.schema.end());
  CHECK(painted->help.find('\x1b') == std::string::npos);
  CHECK(painted->help.find('\n') == std::string::npos);
  CHECK(contains(painted->help, "help in \\u001B[31mred"));
}

TEST_CASE("a model forward that succeeds hands its outputs over, once") {
  auto model = make<ModelProxy>("org.test.half_fail_model", "ok");
  const at::Tensor input = at::ones({2});
  {
    const NamedTensors outputs = model->forward({{"x", input}});
    REQUIRE(outputs.size() == 1);
    CHECK(outputs[0].first == "out");
    CHECK(outputs[0].second.is_same(input));
    CHECK(input.use_count() == 2);
  }
  CHECK(input.use_count() == 1);
}

TEST_CASE("a loss forward that fails after writing the sum: the host releases the sum") {
  auto loss = make<LossProxy>("org.test.half_fail_loss", "fail_after_sum");
  const at::Tensor output = at::ones({});
  const std::string message = plugin_error([&] { loss->forward({{"out", output}}, {}); });
  CHECK(contains(message, "failing after the sum"));
  CHECK(output.use_count() == 1);
}

/// A DatasetProxy over half_fail_s.so whose deleters count into `deleted`.
std::unique_ptr<DatasetProxy> dataset(const std::string& mode, int64_t& deleted) {
  const std::string id = "org.test.half_fail_dataset";
  toml::table options{{"mode", mode}, {"deleted_at", static_cast<int64_t>(reinterpret_cast<intptr_t>(&deleted))}};
  return std::make_unique<DatasetProxy>(component(load("half_fail_s"), id), ComponentConfig{id, "data.train", options},
                                        "train");
}

tp_worker_ctx_t worker_context() {
  tp_worker_ctx_t ctx{};
  ctx.struct_size = sizeof(tp_worker_ctx_t);
  ctx.num_workers = 1;
  return ctx;
}

TEST_CASE("a sample whose field LibTorch refuses: every field's deleter runs, the error names the field") {
  int64_t deleted = 0;
  auto data = dataset("bad_dtype", deleted);
  const std::string message = plugin_error([&] { data->get(2, worker_context()); });
  CHECK(contains(message, "field 'b' of sample 2"));
  CHECK(contains(message, "cannot take"));
  CHECK(deleted == 3);  // the converted field, the refused one and the one after it
}

TEST_CASE("a sample with an unnamed field: every field's deleter runs") {
  int64_t deleted = 0;
  auto data = dataset("no_name", deleted);
  const std::string message = plugin_error([&] { data->get(1, worker_context()); });
  CHECK(contains(message, "field 1 of sample 1 without a name or tensor"));
  CHECK(deleted == 3);
}

TEST_CASE("a sample with two fields of one name is refused, naming the plugin and the field; every deleter runs") {
  // Before, it was accepted and training read the first `a` (a plugin author's trial: x and x).
  int64_t deleted = 0;
  auto data = dataset("dup_name", deleted);
  const std::string message = plugin_error([&] { data->get(2, worker_context()); });
  CHECK(contains(message, "plugin component 'org.test.half_fail_dataset' returned field 'a' twice in sample 2 "
                          "(fields 0 and 1)"));
  CHECK(contains(message, "Rename one in the plugin"));
  CHECK(deleted == 3);
}

TEST_CASE("a good sample's fields are released once, when the tensors go") {
  int64_t deleted = 0;
  auto data = dataset("ok", deleted);
  {
    const NamedTensors sample = data->get(3, worker_context());
    REQUIRE(sample.size() == 3);
    CHECK(sample[2].second.item<int32_t>() == 3);
    CHECK(deleted == 0);
  }
  CHECK(deleted == 3);
}

}  // namespace
