// The library's log routed to the caller's own logger (serving trial F9): tp::infer::set_log and
// tp_infer_set_log hand each line over with its level and source instead of printing it to stderr
// tagged "[host]" in a program that runs no host. On the run of infer_support.h.

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "error_of.h"
#include "export_edits.h"
#include "infer_support.h"
#include "support/test_paths.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"

namespace {

namespace fs = std::filesystem;
using namespace tp::test::infer;
using tp::test::error_of;

struct Line {
  tp::infer::LogLevel level;
  std::string source;
  std::string message;
};

/// An export that opens with a warning: written by a host of a newer LibTorch.
fs::path export_with_warning(const Exported& run) {
  return with_metadata(run.exported, "torchhost.libtorch", "3.1.0", run.dir / "log_future.safetensors");
}

/// Routes the process's log back to stderr when a test case ends, however it ends: a REQUIRE that
/// fails must not leave the route writing into the case's destroyed vector for later cases.
struct StderrLogAtExit {
  StderrLogAtExit() = default;
  StderrLogAtExit(const StderrLogAtExit&) = delete;
  StderrLogAtExit& operator=(const StderrLogAtExit&) = delete;
  ~StderrLogAtExit() { tp::infer::set_log(nullptr); }
};

/// The C callback: appends to the std::vector<Line> behind `user_data`.
void collect_line(void* user_data, int32_t level, const char* source, const char* message) {
  static_cast<std::vector<Line>*>(user_data)->push_back({static_cast<tp::infer::LogLevel>(level), source, message});
}

}  // namespace

TEST_CASE("tp::infer::set_log: the library's lines reach the caller's function, not stderr, until it is reset") {
  const Exported& run = exported();
  const fs::path future = export_with_warning(run);
  std::vector<Line> lines;
  const StderrLogAtExit reset_route;
  tp::infer::set_log([&](tp::infer::LogLevel level, const std::string& source, const std::string& message) {
    lines.push_back({level, source, message});
  });
  const std::string printed = stderr_of(run.dir / "routed.err", [&] { tp::infer::Model::open(future.string(), cpu_options()); });
  INFO(printed);
  CHECK(printed.find("newer than this library's") == std::string::npos);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].level == tp::infer::LogLevel::Warning);
  CHECK(lines[0].source == "tp::infer");
  CHECK(lines[0].message.starts_with("the export '"));
  CHECK(lines[0].message.find("LibTorch 3.1.0 (torchhost.libtorch), newer than this library's") != std::string::npos);
  CHECK(lines[0].message.find('\n') == std::string::npos);

  // Errors only: the warning is dropped.
  lines.clear();
  tp::infer::set_log([&](tp::infer::LogLevel level, const std::string& source, const std::string& message) {
    lines.push_back({level, source, message});
  }, tp::infer::LogLevel::Error);
  tp::infer::Model::open(future.string(), cpu_options());
  CHECK(lines.empty());

  // A function that throws loses nothing: the line goes to stderr.
  tp::infer::set_log([](tp::infer::LogLevel, const std::string&, const std::string&) { throw std::runtime_error("full"); });
  const std::string fallen_back =
      stderr_of(run.dir / "thrown.err", [&] { tp::infer::Model::open(future.string(), cpu_options()); });
  CHECK(fallen_back.find("[tp::infer] warning: the export '") != std::string::npos);

  // Reset: stderr again, tagged as the library's, not "[host]".
  tp::infer::set_log(nullptr);
  const std::string reset = stderr_of(run.dir / "reset.err", [&] { tp::infer::Model::open(future.string(), cpu_options()); });
  CHECK(reset.find("[tp::infer] warning: the export '") != std::string::npos);
  CHECK(reset.find("[host]") == std::string::npos);
  CHECK(lines.empty());
  CHECK(error_of([] { tp::infer::set_log(nullptr, static_cast<tp::infer::LogLevel>(7)); }).find("level 7 is none of") !=
        std::string::npos);
}

TEST_CASE("tp_infer_set_log: a C callback with its user data; an unknown level refused") {
  const Exported& run = exported();
  const fs::path future = export_with_warning(run);
  std::vector<Line> lines;
  const StderrLogAtExit reset_route;
  REQUIRE(tp_infer_set_log(collect_line, &lines, TP_INFER_LOG_WARNING) == TP_OK);
  tp_infer_model_t* model = nullptr;
  const std::string printed = stderr_of(run.dir / "c_routed.err", [&] {
    REQUIRE(tp_infer_open(future.c_str(), "cpu", tp::test::plugin_dir(), &model) == TP_OK);
  });
  tp_infer_close(model);
  CHECK(printed.find("newer than this library's") == std::string::npos);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].level == tp::infer::LogLevel::Warning);
  CHECK(lines[0].source == "tp::infer");

  CHECK(tp_infer_set_log(collect_line, &lines, 4) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("level 4 is none of TP_INFER_LOG_DEBUG") != std::string::npos);
  CHECK(tp_infer_set_log(collect_line, &lines, -1) == TP_ERR_INVALID_ARGUMENT);
  // The refusal changed nothing: the callback still receives the lines.
  tp_infer_model_t* again = nullptr;
  REQUIRE(tp_infer_open(future.c_str(), "cpu", tp::test::plugin_dir(), &again) == TP_OK);
  tp_infer_close(again);
  CHECK(lines.size() == 2);
  REQUIRE(tp_infer_set_log(nullptr, nullptr, TP_INFER_LOG_WARNING) == TP_OK);
}
