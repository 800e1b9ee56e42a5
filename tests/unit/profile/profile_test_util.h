// Shared by the profile tests: the Python oracle runner and ModelProxy construction from a built
// plugin library (tp::test::plugin_dir()).
//
// Include this first: LibTorch must come before doctest (c10 defines its own CHECK).
#pragma once

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tp/framework/config/validate.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

#include "support/doctest_after_torch.h"
#include "support/test_paths.h"

namespace tp::test {

/// Runs tests/unit/profile/<script> with tp::test::python() and `args`; returns stdout (stderr
/// included) and fails the test on a non-zero exit.
inline std::string run_python(const std::string& script, const std::string& args) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()), "the oracle needs the project venv (scripts/setup): " << tp::test::python());
  const std::string command = std::string("'") + tp::test::python() + "' '" + tp::test::source_dir() + "/tests/unit/profile/" +
                              script + "' " + args + " 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  REQUIRE_MESSAGE(status == 0, "python failed:\n" << output);
  return output;
}

/// The integer after `"key": ` in the oracle's one-line JSON (total or a by_op entry); -1 if absent.
inline int64_t json_int(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const auto at = json.find(needle);
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + needle.size()));
}

struct TestHost {
  Logger logger;
  HostServices services{logger, ProcessPlace{}};
};

inline TestHost& host() {
  static TestHost h;  // outlives every library loaded with it
  return h;
}

/// `<tp::test::plugin_dir()>/<name>.so`, loaded once per process.
inline std::shared_ptr<PluginLibrary> library(const std::string& name) {
  const std::filesystem::path file = std::filesystem::path(tp::test::plugin_dir()) / (name + ".so");
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(file), "not built: " << file);
  static std::map<std::string, std::shared_ptr<PluginLibrary>> loaded;
  auto& slot = loaded[file.string()];
  if (!slot) slot = PluginLibrary::load(file, host().services);
  return slot;
}

/// A CPU model `id` from library `name`, with `options` over the schema defaults, seeded.
inline std::unique_ptr<ModelProxy> make_model(const std::string& name, const std::string& id, toml::table options = {}) {
  auto lib = library(name);
  for (const ComponentInfo& info : lib->components())
    if (info.id == id) {
      ComponentConfig config{id, "model", std::move(options)};
      validate_component(config, info.schema, "");  // fills the schema's defaults, as the host does
      at::manual_seed(0);
      auto model = std::make_unique<ModelProxy>(ComponentEntry{&info, lib}, config);
      model->to_device(c10::Device(c10::kCPU));
      return model;
    }
  FAIL("no component " << id << " in " << name);
  return nullptr;
}

/// The declared example inputs of `id` in library `name`.
inline std::vector<tp_example_input_t> examples_of(const std::string& name, const std::string& id) {
  for (const ComponentInfo& info : library(name)->components())
    if (info.id == id) return info.examples;
  FAIL("no component " << id);
  return {};
}

}  // namespace tp::test
