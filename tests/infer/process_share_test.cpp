// The share of the models open in one process (framework/infer/src/process_share.h), compiled into
// this test from the library's sources: a plugin file is loaded and initialised once while any
// member lives, whatever path names it, and unloaded when the last member leaves; the CUDA models
// agree on LibTorch's process-wide TF32 switches. infer_tests checks the same through open models.
#include <ATen/Context.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "process_share.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"
#include "tp/infer/model.h"
#include "error_of.h"

namespace {

namespace fs = std::filesystem;
using tp::test::error_of;

fs::path plugin_file(const std::string& name) { return fs::path(tp::test::plugin_dir()) / (name + ".so"); }

}  // namespace

TEST_CASE("ProcessShare: one loaded library per file while a member lives, unloaded after the last") {
  const fs::path dir = tp::test::fresh_dir("process_share");
  fs::create_symlink(plugin_file("basic_losses"), dir / "basic_losses.so");
  // A hard link: another path and another canonical path, the same device and inode.
  fs::create_hard_link(plugin_file("basic_losses"), dir / "hard_linked_losses.so");

  std::weak_ptr<tp::PluginLibrary> losses;
  {
    auto first = std::make_unique<tp::infer::detail::ProcessShare>();
    const tp::infer::detail::ProcessShare second;
    CHECK(&first->host() == &second.host());
    {
      const std::shared_ptr<tp::PluginLibrary> loaded = first->load(plugin_file("basic_losses"));
      losses = loaded;
      CHECK(loaded->host() == second.host().table());
      CHECK(second.load(plugin_file("basic_losses")) == loaded);
      CHECK(second.load(dir / "basic_losses.so") == loaded);        // through a symbolic link
      CHECK(second.load(dir / "hard_linked_losses.so") == loaded);  // through a hard link
      CHECK(second.load(plugin_file("basic_metrics")) != loaded);
    }
    // The member that loaded it leaves, and no one here holds the library: the share keeps it
    // loaded and initialised for the other member.
    first.reset();
    CHECK(!losses.expired());
  }
  // The last member has left: deinit ran and the library is released.
  CHECK(losses.expired());
  const tp::infer::detail::ProcessShare again;
  const std::shared_ptr<tp::PluginLibrary> reloaded = again.load(plugin_file("basic_losses"));
  CHECK(reloaded->host() == again.host().table());
}

TEST_CASE("ProcessShare: the log prints warnings and errors, or what TORCHHOST_INFER_LOG_LEVEL says") {
  ::unsetenv("TORCHHOST_INFER_LOG_LEVEL");
  {
    const tp::infer::detail::ProcessShare quiet;
    CHECK(quiet.host().logger().least_level() == tp::LogLevel::Warning);
  }
  ::setenv("TORCHHOST_INFER_LOG_LEVEL", "info", 1);
  {
    const tp::infer::detail::ProcessShare chatty;
    CHECK(chatty.host().logger().least_level() == tp::LogLevel::Info);
  }
  ::setenv("TORCHHOST_INFER_LOG_LEVEL", "loud", 1);
  const std::string message = error_of([] { const tp::infer::detail::ProcessShare refused; });
  CHECK(message.find("TORCHHOST_INFER_LOG_LEVEL is 'loud'; set it to debug, info, warning or error") !=
        std::string::npos);
  ::unsetenv("TORCHHOST_INFER_LOG_LEVEL");
  // The refused member never joined: the next one starts the share afresh.
  const tp::infer::detail::ProcessShare next;
  CHECK(next.host().logger().least_level() == tp::LogLevel::Warning);
}

TEST_CASE("ProcessShare: set_log routes the plugins' lines too, for the share alive and the next one") {
  struct Line {
    tp::infer::LogLevel level;
    std::string source, message;
  };
  std::vector<Line> lines;
  const auto collect = [&](tp::infer::LogLevel level, const std::string& source, const std::string& message) {
    lines.push_back({level, source, message});
  };
  {
    const tp::infer::detail::ProcessShare alive;
    tp::infer::detail::ProcessShare::route_log(collect, tp::infer::LogLevel::Info);
    const tp_host_t* table = alive.host().table();
    table->log(table, TP_LOG_INFO, "two\nlines");
    table->log(table, TP_LOG_DEBUG, "below the level");
    REQUIRE(lines.size() == 2);  // one line per line of the plugin's message, each tagged
    CHECK(lines[0].source.starts_with("plugin"));
    CHECK(lines[0].level == tp::infer::LogLevel::Info);
    CHECK(lines[0].message == "two");
    CHECK(lines[1].message == "lines");
  }
  // A share made afresh keeps the route and its level, whatever the environment says.
  ::setenv("TORCHHOST_INFER_LOG_LEVEL", "loud", 1);
  {
    const tp::infer::detail::ProcessShare next;
    CHECK(next.host().logger().least_level() == tp::LogLevel::Info);
    next.host().table()->log(next.host().table(), TP_LOG_ERROR, "failed");
    REQUIRE(lines.size() == 3);
    CHECK(lines[2].level == tp::infer::LogLevel::Error);
  }
  ::unsetenv("TORCHHOST_INFER_LOG_LEVEL");
  tp::infer::detail::ProcessShare::route_log(nullptr, tp::infer::LogLevel::Warning);
}

TEST_CASE("ProcessShare: the CUDA models agree on TF32, which is one switch per process") {
  auto first = std::make_unique<tp::infer::detail::ProcessShare>();
  first->use_cuda_tf32(false, "a.safetensors");
  CHECK(!at::globalContext().allowTF32CuBLAS());
  tp::infer::detail::ProcessShare second;
  const std::string message = error_of([&] { second.use_cuda_tf32(true, "b.safetensors"); });
  INFO(message);
  CHECK(message.find("'b.safetensors' asks for OpenOptions::tf32 = true") != std::string::npos);
  CHECK(message.find("'a.safetensors' runs on CUDA with tf32 = false") != std::string::npos);
  CHECK(!at::globalContext().allowTF32CuBLAS()); // refused: the open model's setting stands
  // A CPU member (no use_cuda_tf32) does not count; the first CUDA model leaving frees the switch.
  first.reset();
  CHECK(error_of([&] { second.use_cuda_tf32(true, "b.safetensors"); }).empty());
  CHECK(at::globalContext().allowTF32CuBLAS());
  CHECK(at::globalContext().allowTF32CuDNN());
  // A second CUDA member with the same setting joins, and may set it again (counted once).
  tp::infer::detail::ProcessShare third;
  CHECK(error_of([&] { third.use_cuda_tf32(true, "c.safetensors"); }).empty());
  CHECK(error_of([&] { third.use_cuda_tf32(true, "c.safetensors"); }).empty());
  const std::string both = error_of([&] { tp::infer::detail::ProcessShare().use_cuda_tf32(false, "d.safetensors"); });
  CHECK(both.find("the open models 'b.safetensors' and 1 more run on CUDA with tf32 = true") != std::string::npos);
  // A member asking again for the other setting is refused while another CUDA model runs; the
  // message names that one, neither the member itself nor 'a', closed above.
  CHECK(error_of([&] { third.use_cuda_tf32(false, "c.safetensors"); })
            .find("the open model 'b.safetensors' runs on CUDA with tf32 = true") != std::string::npos);
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(true);
}

TEST_CASE("ProcessShare: a plugin file replaced on disk after this process loaded it is refused, naming it") {
  // Serving trial F11: a new build renamed over a loaded plugin was never loaded (the loader keeps
  // the first build mapped and hands it out again for the path), so every model opened after the
  // upgrade ran the old code while open's SHA-256 check hashed the new file.
  const fs::path dir = tp::test::fresh_dir("process_share_replaced");
  const fs::path plugin = dir / "basic_metrics.so";
  fs::copy_file(plugin_file("basic_metrics"), plugin);
  std::weak_ptr<tp::PluginLibrary> first_build;
  {
    const tp::infer::detail::ProcessShare member;
    first_build = member.load(plugin);
    CHECK(member.load(plugin) == first_build.lock()); // unchanged: the same library
    // The safe deployment of a new build: written beside, renamed over (another inode and size).
    fs::copy_file(plugin_file("basic_metrics"), dir / "new_build.tmp");
    std::ofstream(dir / "new_build.tmp", std::ios::app | std::ios::binary) << '\n';
    fs::rename(dir / "new_build.tmp", plugin);
    const std::string message = error_of([&] { member.load(plugin); });
    INFO(message);
    CHECK(message.find("the plugin " + plugin.string()) != std::string::npos);
    CHECK(message.find("changed on disk since this process loaded it at ") != std::string::npos);
    CHECK(message.find("Restart the process to load the new build.") != std::string::npos);
  }
  // Every member gone and the library released: its code stays loaded all the same, so the new
  // file is still refused.
  CHECK(first_build.expired());
  const tp::infer::detail::ProcessShare later;
  CHECK(error_of([&] { later.load(plugin); }).find("changed on disk since") != std::string::npos);
  // Another plugin file, never loaded before, still loads.
  CHECK(later.load(plugin_file("basic_losses")) != nullptr);
}
