// ModelProxy's optional entries against real libraries: an ABI 1.0 model keeps loading and gets a
// configuration error naming it only when activation checkpointing, layer depths
// (optim.layer_decay) or frozen BatchNorm statistics (model.freeze_bn_stats) are asked for; so
// does a model with NULL entries or one that refuses; vision_models' models accept and declare.
// graph_capture_blocker (ABI 1.8): "" for a NULL entry, a table that predates it and TP_OK; the
// plugin's reason for TP_ERR_UNSUPPORTED; a PluginError for any other status.
#include <c10/core/GradMode.h>

#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

#include <filesystem>
#include <string>

#include "support/doctest_after_torch.h"
#include "support/test_paths.h"

namespace {

using namespace tp;

struct ModelProxyHost {
  Logger logger;
  HostServices services{logger, ProcessPlace{}};
};

ModelProxyHost& host() {
  static ModelProxyHost h;  // outlives every library loaded with it
  return h;
}

std::shared_ptr<PluginLibrary> load(const std::filesystem::path& file) {
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(file), "not built: " << file);
  static std::map<std::string, std::shared_ptr<PluginLibrary>> loaded;
  auto& slot = loaded[file.string()];
  if (!slot) slot = PluginLibrary::load(file, host().services);
  return slot;
}

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(tp::test::build_dir()) / "tests/plugins/fixtures" / name / (name + ".so");
}

/// A ModelProxy for component `id` of `library`, with `options` (all keys the schema declares).
std::unique_ptr<ModelProxy> make_model(const std::shared_ptr<PluginLibrary>& library, const std::string& id,
                                       toml::table options = {}) {
  for (const ComponentInfo& info : library->components())
    if (info.id == id) return std::make_unique<ModelProxy>(ComponentEntry{&info, library}, ComponentConfig{id, "model", options});
  FAIL("no component " << id);
  return nullptr;
}

/// The ConfigError `fn` throws (checked: about `key`, exit 2), as its message.
template <typename Fn>
std::string config_error(Fn&& fn, const std::string& key = "model.activation_checkpointing") {
  try {
    fn();
  } catch (const ConfigError& e) {
    CHECK(e.key_path() == key);
    CHECK(e.exit_code() == kExitConfig);
    return e.what();
  }
  FAIL_CHECK("expected a tp::ConfigError");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("an ABI 1.0 model loads and runs; asking it for checkpointing is a config error naming it") {
  auto library = load(fixture("ckpt_abi10_model"));
  CHECK(library->abi().minor == 0);
  auto model = make_model(library, "org.test.abi10_model");
  CHECK_FALSE(model->supports_activation_checkpointing());  // the pointer past struct_size is never read
  CHECK_NOTHROW(model->set_activation_checkpointing(false));
  const std::string message = config_error([&] { model->set_activation_checkpointing(true); });
  for (const char* part : {"model.activation_checkpointing", "org.test.abi10_model", "ckpt_abi10_model.so",
                           "plugin ABI 1.0", "predates plugin ABI 1.1", "activation_checkpointing = true"})
    CHECK_MESSAGE(contains(message, part), "'" << part << "' in: " << message);
  CHECK_FALSE(contains(message, "beyond the table's struct_size"));
}

TEST_CASE("a 1.1 model whose entry is NULL: the same config error, saying so") {
  auto model = make_model(load(fixture("ckpt_null_model")), "org.test.null_model");
  CHECK_FALSE(model->supports_activation_checkpointing());
  const std::string message = config_error([&] { model->set_activation_checkpointing(true); });
  CHECK(contains(message, "org.test.null_model"));
  CHECK(contains(message, "leaves set_activation_checkpointing NULL"));
}

TEST_CASE("vision_models: deep_cnn accepts; an mlp without hidden layers refuses with its reason") {
  auto library = load(std::filesystem::path(tp::test::plugin_dir()) / "vision_models.so");
  toml::table deep{{"input", "image"}, {"in_channels", 3}, {"num_classes", 3}, {"width", 4},
                   {"depth", 2},       {"image_size", 32}, {"residual", true}};
  auto model = make_model(library, "org.torchhost.deep_cnn", deep);
  CHECK(model->supports_activation_checkpointing());
  model->to_device(c10::Device(c10::kCPU));
  CHECK_NOTHROW(model->set_activation_checkpointing(true));
  CHECK_NOTHROW(model->set_activation_checkpointing(false));

  toml::table linear{{"input", "image"}, {"hidden", toml::array{}}, {"in_features", 3072}, {"num_classes", 3},
                     {"dropout", 0.0}};
  auto mlp = make_model(library, "org.torchhost.mlp", linear);
  const std::string message = config_error([&] { mlp->set_activation_checkpointing(true); });
  CHECK(contains(message, "org.torchhost.mlp"));
  CHECK(contains(message, "refused"));
  CHECK(contains(message, "hidden = []"));
}

TEST_CASE("ABI 1.4 entries: an ABI 1.0 model and NULL entries are configuration errors naming the key") {
  auto old = make_model(load(fixture("ckpt_abi10_model")), "org.test.abi10_model");
  std::string message = config_error([&] { old->layer_depths(); }, "optim.layer_decay");
  for (const char* part : {"optim.layer_decay", "org.test.abi10_model", "predates plugin ABI 1.4", "layer_depths"})
    CHECK_MESSAGE(contains(message, part), "'" << part << "' in: " << message);
  message = config_error([&] { old->set_batchnorm_frozen(true); }, "model.freeze_bn_stats");
  CHECK(contains(message, "predates plugin ABI 1.4"));
  CHECK(contains(message, "freeze_bn_stats = true"));
  CHECK_NOTHROW(old->set_batchnorm_frozen(false));
  CHECK_FALSE(contains(message, "beyond the table's struct_size"));

  auto null_entries = make_model(load(fixture("ckpt_null_model")), "org.test.null_model");
  message = config_error([&] { null_entries->layer_depths(); }, "optim.layer_decay");
  CHECK(contains(message, "leaves layer_depths NULL"));
  message = config_error([&] { null_entries->set_batchnorm_frozen(true); }, "model.freeze_bn_stats");
  CHECK(contains(message, "leaves set_batchnorm_frozen NULL"));
}

TEST_CASE("vision_models declare their depths; an mlp without hidden layers or BatchNorm refuses, saying why") {
  auto library = load(std::filesystem::path(tp::test::plugin_dir()) / "vision_models.so");
  toml::table cnn{{"input", "image"}, {"in_channels", 3}, {"num_classes", 3}, {"width", 4}, {"image_size", 32}};
  auto small = make_model(library, "org.torchhost.small_cnn", cnn);
  const std::vector<std::pair<std::string, uint32_t>> expected = {
      {"trunk.conv1", 0}, {"trunk.bn1", 0}, {"trunk.conv2", 1}, {"trunk.bn2", 1}, {"trunk.conv3", 2}, {"trunk.bn3", 2}};
  CHECK(small->layer_depths() == expected);
  CHECK_NOTHROW(small->set_batchnorm_frozen(true));
  toml::table deep{{"input", "image"}, {"in_channels", 3}, {"num_classes", 3}, {"width", 4},
                   {"depth", 2},       {"image_size", 32}, {"residual", true}};
  const std::vector<std::pair<std::string, uint32_t>> deep_expected = {{"stem", 0}, {"blocks.0", 1}, {"blocks.1", 2}};
  CHECK(make_model(library, "org.torchhost.deep_cnn", deep)->layer_depths() == deep_expected);

  toml::table linear{{"input", "image"}, {"hidden", toml::array{}}, {"in_features", 3072}, {"num_classes", 3},
                     {"dropout", 0.0}};
  auto mlp = make_model(library, "org.torchhost.mlp", linear);
  std::string message = config_error([&] { mlp->layer_depths(); }, "optim.layer_decay");
  CHECK(contains(message, "refused to declare layer depths"));
  CHECK(contains(message, "declares no layer depths"));
  message = config_error([&] { mlp->set_batchnorm_frozen(true); }, "model.freeze_bn_stats");
  CHECK(contains(message, "has no BatchNorm layer"));
}

TEST_CASE("graph_capture_blocker: NULL, a table from before ABI 1.8 and TP_OK mean capturable") {
  // NULL in a full-size table.
  CHECK(make_model(load(fixture("ckpt_null_model")), "org.test.null_model")->graph_capture_blocker() == "");
  // Built for 1.7: struct_size ends where check_graph_capture starts, and the slot past it holds a
  // function that answers TP_ERR_UNSUPPORTED naming the mistake: a host that called it would
  // return that text instead of "".
  auto library17 = load(fixture("abi17_model"));
  CHECK(library17->abi().minor == 7);
  CHECK(make_model(library17, "org.test.abi17_model")->graph_capture_blocker() == "");
  // Built for 1.0: the same, with the whole of 1.1 to 1.8 missing.
  CHECK(make_model(load(fixture("ckpt_abi10_model")), "org.test.abi10_model")->graph_capture_blocker() == "");
  auto answers = load(fixture("graph_capture_model"));
  CHECK(make_model(answers, "org.test.graph_capture_model", toml::table{{"answer", 0}})->graph_capture_blocker() == "");
}

TEST_CASE("graph_capture_blocker: TP_ERR_UNSUPPORTED is the plugin's reason; another status is a PluginError") {
  auto answers = load(fixture("graph_capture_model"));
  auto refuses = make_model(answers, "org.test.graph_capture_model", toml::table{{"answer", 3}});
  CHECK(refuses->graph_capture_blocker() == "reads the number of boxes on the host");
  // Asked again (the host calls it once, but nothing forbids more): the same answer, no stale text.
  CHECK(refuses->graph_capture_blocker() == "reads the number of boxes on the host");
  // A refusal without a message is still a refusal: never "" (which would mean capturable).
  auto silent = make_model(answers, "org.test.graph_capture_model", toml::table{{"answer", -3}});
  CHECK(silent->graph_capture_blocker() == "(the plugin gave no message)");

  auto failing = make_model(answers, "org.test.graph_capture_model", toml::table{{"answer", 7}});
  try {
    failing->graph_capture_blocker();
    FAIL_CHECK("expected a tp::PluginError");
  } catch (const PluginError& e) {
    const std::string message = e.what();
    for (const char* part : {"org.test.graph_capture_model", "check_graph_capture", "TP_ERR_INTERNAL",
                             "graph_capture_model: asked to fail"})
      CHECK_MESSAGE(contains(message, part), "'" << part << "' in: " << message);
  }
}

TEST_CASE("graph_capture_blocker: a C++ model that declares graph_capture_blocker() (uncapturable_model.so)") {
  // The fixture another test trains with run.cuda_graphs: the adapter turns the class's reason into
  // TP_ERR_UNSUPPORTED, and the proxy hands it back word for word.
  auto library = load(std::filesystem::path(tp::test::fixture_plugin_dir()) / "uncapturable_model.so");
  auto model = make_model(library, "org.torchhost.test.uncapturable_model",
                          toml::table{{"features", 3072}, {"hidden", 64}, {"num_classes", 3}, {"input", "image"}});
  model->to_device(c10::Device(c10::kCPU));
  CHECK(model->graph_capture_blocker() == "reads its output's values on the host");
  // vision_models declare nothing: capturable.
  auto vision = load(std::filesystem::path(tp::test::plugin_dir()) / "vision_models.so");
  toml::table cnn{{"input", "image"}, {"in_channels", 3}, {"num_classes", 3}, {"width", 4}, {"image_size", 32}};
  CHECK(make_model(vision, "org.torchhost.small_cnn", cnn)->graph_capture_blocker() == "");
}

TEST_CASE("after_optimizer_step (ABI 1.14): absent from a NULL entry and a 1.13 table, never read past struct_size") {
  CHECK_FALSE(make_model(load(fixture("ckpt_null_model")), "org.test.null_model")->has_after_optimizer_step());
  // Built for 1.13: struct_size ends where after_optimizer_step starts, and the slot past it holds
  // a function that fails naming the mistake: a host that called it would throw here.
  auto library = load(fixture("abi113_model"));
  CHECK(library->abi().minor == 13);
  auto old = make_model(library, "org.test.abi113_model");
  CHECK_FALSE(old->has_after_optimizer_step());
  CHECK_NOTHROW(old->after_optimizer_step(1, 10));
  CHECK_FALSE(make_model(load(fixture("ckpt_abi10_model")), "org.test.abi10_model")->has_after_optimizer_step());
}

TEST_CASE("after_optimizer_step: a C++ model's hook runs under no grad; its failure names the function and the step") {
  // momentum_model.so refuses grad mode on and a step that is not the previous one + 1.
  auto library = load(std::filesystem::path(tp::test::fixture_plugin_dir()) / "momentum_model.so");
  auto model = make_model(library, "org.torchhost.test.momentum_model",
                          toml::table{{"features", 12}, {"hidden", 4}, {"num_classes", 3}, {"input", "image"},
                                      {"base_momentum", 0.9}});
  model->to_device(c10::Device(c10::kCPU));
  REQUIRE(model->has_after_optimizer_step());
  REQUIRE(c10::GradMode::is_enabled());  // the proxy, not the caller, turns it off
  CHECK_NOTHROW(model->after_optimizer_step(1, 10));
  CHECK_NOTHROW(model->after_optimizer_step(2, 10));
  CHECK(c10::GradMode::is_enabled());  // and restores it
  try {
    model->after_optimizer_step(4, 10);
    FAIL_CHECK("expected a tp::PluginError");
  } catch (const PluginError& e) {
    const std::string message = e.what();
    for (const char* part : {"org.torchhost.test.momentum_model", "after_optimizer_step", "after optimizer step 4 of 10",
                             "step 4 of 10 after step 2"})
      CHECK_MESSAGE(contains(message, part), "'" << part << "' in: " << message);
  }
}

}  // namespace
