// Shared by the GPU tests (tests/gpu/*_test.cpp, one ctest entry per file): the quickstart on
// CUDA, history and TOML readers, and the numbers a test process can read about its own LibTorch.
#pragma once

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <toml++/toml.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace tp::gpu_test {

/// What every GPU test says when it starts on a machine without a GPU:
/// REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda).
inline constexpr char kNeedsCuda[] = "gpu_tests need a CUDA build of LibTorch and a visible GPU";

/// Two epochs of the quickstart (small_cnn on shapes) on CUDA, quiet, without plots.
inline const std::string kQuickstart =
    "--config configs/quickstart.toml --set run.device=\"cuda\" --set progress.mode=\"off\" "
    "--set train.epochs=2 --set plots.enabled=false ";

using tp::test::contains;

inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// `key` of the run's last epoch record.
inline double last_epoch_value(const std::filesystem::path& dir, const std::string& key) {
  const auto epochs = tp::test::rows_of(tp::test::read_history(dir), "epoch");
  REQUIRE(!epochs.empty());
  const auto it = epochs.back().values.find(key);
  REQUIRE_MESSAGE(it != epochs.back().values.end(), "no " << key << " in the last epoch record of " << dir.string());
  return it->second;
}

/// The run's step records (history.jsonl, kind "step").
inline std::vector<tp::test::Row> step_rows(const std::filesystem::path& dir) {
  return tp::test::rows_of(tp::test::read_history(dir), "step");
}

/// A TOML file the host wrote (runtime.toml, report.toml); fails the test, naming it, when it does not parse.
inline toml::table read_toml(const std::filesystem::path& file) {
  REQUIRE_MESSAGE(std::filesystem::exists(file), file.string() << " was not written");
  try {
    return toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    FAIL(file.string() << " does not parse: " << e.description());
  }
  return {};
}

/// A number of a TOML table (integer or float), NaN when absent.
inline double toml_number(const toml::table& table, const std::string& path) {
  const toml::node_view<const toml::node> node = table.at_path(path);
  if (const auto* f = node.as_floating_point()) return f->get();
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  return std::nan("");
}

/// A string of a TOML table, "" when absent.
inline std::string toml_string(const toml::table& table, const std::string& path) {
  return table.at_path(path).value_or(std::string());
}

/// A boolean of a TOML table; fails the test when absent.
inline bool toml_bool(const toml::table& table, const std::string& path) {
  const std::optional<bool> value = table.at_path(path).value<bool>();
  REQUIRE_MESSAGE(value.has_value(), "no boolean " << path);
  return *value;
}

/// The CUDA runtime and cuDNN versions of this process's LibTorch, spelled as the host's
/// provenance spells them ("13.0", "9.10.2"; engine/setup/provenance.cpp), so runtime.toml can
/// be checked against what the library itself reports.
inline std::string cuda_runtime_version() {
  const long code = at::detail::getCUDAHooks().versionCUDART();
  if (code <= 0) return "";
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

inline std::string cudnn_version() {
  if (!at::detail::getCUDAHooks().hasCuDNN()) return "";
  const long code = at::detail::getCUDAHooks().versionCuDNN();
  if (code <= 0) return "";
  const long major = code >= 90000 ? code / 10000 : code / 1000;
  const long minor = code >= 90000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

/// Runs `host <args>` with environment variables set for it (and its ranks): "NAME=value ...".
inline tp::test::HostRun run_host_with_env(const std::string& env, const std::string& args) {
  std::string command = env;
  command.append(" '").append(tp::test::build_dir()).append("/bin/host' ").append(args);
  return tp::test::run_shell(command);
}

/// The share of wall time the training loop waited for the loader over the step records after
/// the first (whose window includes the start-up): sum(time/data_wait_s) / sum(time/step_s).
inline double data_wait_share(const std::filesystem::path& dir) {
  const auto steps = step_rows(dir);
  REQUIRE(steps.size() >= 3);
  double wait = 0, step = 0;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    REQUIRE(steps[i].has("time/data_wait_s"));
    REQUIRE(steps[i].has("time/step_s"));
    wait += steps[i].values.at("time/data_wait_s");
    step += steps[i].values.at("time/step_s");
  }
  REQUIRE(step > 0);
  return wait / step;
}

}  // namespace tp::gpu_test
