// The other side of the refusals: a correct fixture loads from its own directory, `host plugins
// check` reports it healthy, and a plugin whose calls throw still only ever returns statuses.
#include <thread>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/callback_proxy.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/plugin_check.h"
#include "tp/iface/callback.h"
#include "tp/iface/dataset.h"

#include "loader_test_util.h"

namespace {

using namespace tp;
using namespace tp::test;

TEST_CASE("a well-formed Tier S callback loads from a fixture directory") {
  TestHost host;
  Registry registry(host.services);
  registry.load_search_path({{fixture_dir("good_callback"), "--plugin-dir"}});
  REQUIRE(registry.libraries().size() == 1);
  const auto& library = *registry.libraries()[0];
  CHECK(library.name() == "good_callback");
  CHECK(library.path() == fixture("good_callback"));
  CHECK(library.abi().major == TP_ABI_MAJOR);
  CHECK(library.abi().minor == TP_ABI_MINOR);

  const ComponentEntry entry = registry.find("org.test.good_callback", TP_KIND_CALLBACK, "callbacks[0]");
  REQUIRE(entry.info != nullptr);
  CHECK(entry.library.get() == &library);
  CHECK(entry.info->tier == TP_TIER_S);
  CHECK(entry.info->version == "1.0.0");
  REQUIRE(entry.info->schema.size() == 1);
  CHECK(entry.info->schema[0].path == "max_steps");
  CHECK(entry.info->schema[0].type == ValueType::Int);
  CHECK(entry.info->schema[0].default_literal == "10");
  CHECK(entry.info->interface_table != nullptr);
}

TEST_CASE("`host plugins check` reports the good callback healthy") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("good_callback"), host.services);
  const std::vector<CheckLine> lines = check_library(library);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].component == "org.test.good_callback");
  CHECK_MESSAGE(lines[0].ok, lines[0].what);
  CHECK_MESSAGE(contains(lines[0].what, "accepted a fit-begin event"), lines[0].what);
  CHECK_MESSAGE(contains(lines[0].what, "destroy(NULL) safe"), lines[0].what);
}

TEST_CASE("exceptions inside TP_GUARD come back as statuses with the exception text (PLG-7)") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("throws"), host.services);
  REQUIRE(library->components().size() == 1);
  const ComponentInfo& info = library->components()[0];
  CHECK(info.id == "org.test.throws");
  const auto& table = *static_cast<const tp_dataset_v1_t*>(info.interface_table);
  HostServices::take_last_error();

  // create() fails, so the other calls get no instance; they throw before looking at it.
  void* self = nullptr;
  CHECK(table.create(host.services.table(), nullptr, "train", &self) == TP_ERR_INTERNAL);
  CHECK(HostServices::take_last_error() == "throws: create exploded");
  CHECK(self == nullptr);

  uint64_t count = 0;
  CHECK(table.size(nullptr, &count) == TP_ERR_INTERNAL);
  CHECK(HostServices::take_last_error() == "throws: size exploded");

  CHECK(table.set_epoch(nullptr, 1) == TP_ERR_INTERNAL);
  CHECK(HostServices::take_last_error() == "throws: set_epoch exploded");

  // get_sample runs on loader workers: its message belongs to the worker thread alone.
  tp_status worker_status = TP_OK;
  std::string worker_error;
  std::thread worker([&] {
    tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, 7};
    tp_field_t fields[4]{};
    uint32_t field_count = 0;
    worker_status = table.get_sample(nullptr, 0, &ctx, fields, 4, &field_count);
    worker_error = HostServices::take_last_error();
  });
  worker.join();
  CHECK(worker_status == TP_ERR_INTERNAL);
  CHECK(worker_error == "throws: get_sample exploded");
  CHECK(HostServices::take_last_error().empty());

  table.destroy(nullptr); // PLG-12: accepts NULL
}

TEST_CASE("the host turns a thrown-and-guarded create into a PluginError naming the component") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("throws"), host.services);
  const ComponentEntry entry{&library->components()[0], library};
  const ComponentConfig config{"org.test.throws", "data.train", {}};
  try {
    DatasetProxy dataset(entry, config, "train");
    FAIL("DatasetProxy was created although create() failed");
  } catch (const PluginError& e) {
    CHECK(e.component_id() == "org.test.throws");
    CHECK(e.function() == "create");
    CHECK_MESSAGE(contains(e.what(), "throws: create exploded"), e.what());
  }
}

TEST_CASE("a create that returns TP_OK but no instance is refused at create, for every kind (plugin trial F11)") {
  // The check is the proxies' shared PluginInstance::check_create; a dataset and a callback (the
  // Tier S kinds a C fixture can have) stand for the rest. Before it, the dataset's next call,
  // size, got self = NULL and took the blame.
  TestHost host;
  const auto expect_refused = [](const auto& make, const std::string& id, const std::string& context) {
    try {
      make();
      FAIL("the proxy was created although create() gave no instance");
    } catch (const PluginError& e) {
      CHECK(e.component_id() == id);
      CHECK(e.function() == "create");
      CHECK_MESSAGE(contains(e.what(), "plugin component '" + id + "'"), e.what());
      CHECK_MESSAGE(contains(e.what(), "failed in create" + context + ": create returned TP_OK but no instance"), e.what());
      CHECK(e.exit_code() == kExitRuntime);
    }
  };
  const auto dataset_library = PluginLibrary::load(fixture("no_instance_dataset"), host.services);
  const ComponentEntry dataset{&dataset_library->components()[0], dataset_library};
  const ComponentConfig dataset_config{"org.test.no_instance_dataset", "data.train", {}};
  expect_refused([&] { DatasetProxy proxy(dataset, dataset_config, "train"); }, "org.test.no_instance_dataset",
                 " for split 'train' ([data.train])");

  const auto callback_library = PluginLibrary::load(fixture("no_instance_callback"), host.services);
  const ComponentEntry callback{&callback_library->components()[0], callback_library};
  const ComponentConfig callback_config{"org.test.no_instance_callback", "callbacks[0]", {}};
  expect_refused([&] { CallbackProxy proxy(callback, callback_config); }, "org.test.no_instance_callback", "");
}

TEST_CASE("`host plugins check` reports a throwing dataset as a failed line, without throwing") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("throws"), host.services);
  std::vector<CheckLine> lines;
  REQUIRE_NOTHROW(lines = check_library(library));
  REQUIRE(lines.size() == 1);
  CHECK_FALSE(lines[0].ok);
  CHECK_MESSAGE(contains(lines[0].what, "create exploded"), lines[0].what);
}

}  // namespace
