// The inference library on exports an adversary wrote (security trial F1, F2, F5): a header or a
// metadata entry nested 200,000 deep is a damaged file, not a stack overflow; a component id with
// control characters is refused with them made visible; a forged plugin_files entry never reaches
// the log; a model file (a TorchScript program) outside the export's directory is not loaded
// unless the caller allows it. On the run of infer_support.h.
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <doctest/doctest.h>

#include "error_of.h"
#include "export_edits.h"
#include "infer_support.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"

namespace {

namespace fs = std::filesystem;
using namespace tp::test::infer;
using tp::test::error_of;

// `[[[...1...]]]`, `depth` arrays deep: a few hundred kB that overflowed the stack when copied.
std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

}  // namespace

TEST_CASE("tp::infer: an export nested 200,000 deep is named damaged, in its header or inside a metadata entry") {
  const Exported& run = exported();
  // Before: SIGSEGV, ~1,000,000 frames of nlohmann's copy constructor.
  const fs::path deep_header = with_header(run.exported, run.dir / "deep_header.safetensors", [](const std::string& header) {
    const std::string opening = "\"__metadata__\":{";
    std::string text = header;
    text.insert(text.find(opening) + opening.size(), "\"deep\":" + nested_arrays(200000) + ",");
    return text;
  });
  const std::string header_message = error_of([&] { tp::infer::Model::open(deep_header.string(), cpu_options()); });
  INFO(header_message);
  CHECK(header_message.find("is damaged or truncated") != std::string::npos);
  CHECK(header_message.find("nested at most 64 deep") != std::string::npos);

  const std::string deep_options =
      "{\"component\":\"org.torchhost.small_cnn\",\"options\":{\"x\":" + nested_arrays(200000) + "}}";
  const fs::path deep_entry = with_metadata(run.exported, "torchhost.model", deep_options, run.dir / "deep_entry.safetensors");
  const std::string entry_message = error_of([&] { tp::infer::Model::open(deep_entry.string(), cpu_options()); });
  INFO(entry_message);
  CHECK(entry_message.find("the metadata torchhost.model of") != std::string::npos);
  CHECK(entry_message.find("is not valid JSON; the file is damaged") != std::string::npos);
}

TEST_CASE("tp::infer: an export's component id with control characters is refused, shown escaped") {
  const Exported& run = exported();
  // Before: "the export's model 'org.<ESC>[31mRED<ESC>[0m\nFAKE LINE: ok' is built by its plugin, ..."
  const std::string forged = nlohmann::json{{"component", "org.\x1b[31mRED\x1b[0m\nFAKE LINE: ok"}, {"options", {}}}.dump();
  const fs::path file = with_metadata(run.exported, "torchhost.model", forged, run.dir / "forged_model.safetensors");
  const std::string message = error_of([&] { tp::infer::Model::open(file.string(), cpu_options()); });
  INFO(message);
  CHECK(message.find("which is not a component id") != std::string::npos);
  CHECK(message.find("org.\\u001B[31mRED\\u001B[0m\\u000AFAKE LINE: ok") != std::string::npos);
  CHECK(message.find('\x1b') == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("tp::infer: a forged torchhost.plugin_files entry is passed over, never printed") {
  const Exported& run = exported();
  // Before: "SHA-256 <ESC>[2J<ESC>[31mPWN... then, ..." in the library's warning.
  const nlohmann::json plugins = nlohmann::json::array(
      {{{"library", "vision_models.so"}, {"sha256", "\x1b[2J\x1b[31mPWNED" + std::string(52, 'a')}},
       {{"library", "image_folder.so\n2026-11-29 [host] info: all good"}, {"sha256", std::string(64, 'a')}}});
  const fs::path file = with_metadata(run.exported, "torchhost.plugin_files", plugins.dump(), run.dir / "forged_files.safetensors");
  std::string message;
  const std::string log = stderr_of(run.dir / "forged_files.err", [&] {
    message = error_of([&] { tp::infer::Model::open(file.string(), cpu_options()).run_files({run.files[0]}, 1); });
  });
  INFO(log);
  CHECK(message.empty());
  CHECK(log.find('\x1b') == std::string::npos);
  CHECK(log.find("all good") == std::string::npos);
}

namespace {

// The small_cnn export in `dir`, its model replaced by org.torchhost.torchscript loading `path`
// (security trial F5's torchscript_path.safetensors: a TorchScript file that returns /etc/hostname).
fs::path torchscript_export(const fs::path& dir, const std::string& path) {
  fs::create_directories(dir);
  const std::string model =
      nlohmann::json{{"component", "org.torchhost.torchscript"},
                     {"options", {{"path", path}, {"inputs", {"image"}}, {"outputs", {"logits", "leak"}}}}}
          .dump();
  return with_metadata(exported().exported, "torchhost.model", model, dir / "model.safetensors");
}

}  // namespace

TEST_CASE("tp::infer: an export's model file outside the export's directory is refused unless the caller allows it") {
  const Exported& run = exported();
  const fs::path evil = run.dir / "ts_evil.pt";
  std::ofstream(evil) << "a TorchScript program";
  const fs::path dir = run.dir / "exports_f5";
  const std::string refusal = "outside the export's directory";
  // Before: each was handed to torch::jit::load, the program run on the first call.
  for (const std::string& path : {std::string("../ts_evil.pt"), evil.string(), std::string("/etc/hostname")}) {
    CAPTURE(path);
    const fs::path file = torchscript_export(dir, path);
    tp::infer::Error::Kind kind = tp::infer::Error::Kind::Internal;
    const std::string message = error_of([&] {
      try {
        tp::infer::Model::open(file.string(), cpu_options());
      } catch (const tp::infer::Error& e) {
        kind = e.kind();
        throw;
      }
    });
    INFO(message);
    CHECK(message.find("names the file '" + fs::weakly_canonical(dir / path).string() + "' (its model's `path`, "
                       "org.torchhost.torchscript), " + refusal) != std::string::npos);
    CHECK(message.find("OpenOptions::allow_files_outside_export") != std::string::npos);
    CHECK(kind == tp::infer::Error::Kind::Setup);
  }
  // A link beside the export to a file elsewhere is elsewhere.
  fs::remove(dir / "link.pt");
  fs::create_symlink(evil, dir / "link.pt");
  CHECK(error_of([&] { tp::infer::Model::open(torchscript_export(dir, "link.pt").string(), cpu_options()); })
            .find(refusal) != std::string::npos);
  // C: tp_infer_open refuses it as the deployment's fault.
  const fs::path outside = torchscript_export(dir, "../ts_evil.pt");
  tp_infer_model_t* model = nullptr;
  CHECK(tp_infer_open(outside.c_str(), "cpu", tp::test::plugin_dir(), &model) == TP_ERR_CONFIG);
  CHECK(std::string(tp_infer_last_error()).find(refusal) != std::string::npos);
  CHECK(tp_infer_open_with(outside.c_str(), "cpu", tp::test::plugin_dir(), 2, &model) == TP_ERR_INVALID_ARGUMENT);

  // Allowed, or beside the export: the check lets it through to the plugin (which fails on this
  // file, no TorchScript program) and the log names the file with its SHA-256.
  tp::infer::OpenOptions trusting = cpu_options();
  trusting.allow_files_outside_export = true;
  std::string message;
  const std::string log = stderr_of(run.dir / "f5_allowed.err", [&] {
    message = error_of([&] { tp::infer::Model::open(outside.string(), trusting); });
  });
  INFO(log);
  INFO(message);
  CHECK(message.find(refusal) == std::string::npos);
  CHECK(message.find("org.torchhost.torchscript") != std::string::npos);
  CHECK(log.find("has its model load the file '" + evil.string() + "'") != std::string::npos);
  CHECK(log.find(refusal + " (OpenOptions::allow_files_outside_export)") != std::string::npos);
  CHECK(tp_infer_open_with(outside.c_str(), "cpu", tp::test::plugin_dir(), TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT,
                           &model) != TP_OK);
  CHECK(std::string(tp_infer_last_error()).find(refusal) == std::string::npos);
  fs::copy_file(evil, dir / "beside.pt", fs::copy_options::overwrite_existing);
  CHECK(error_of([&] { tp::infer::Model::open(torchscript_export(dir, "beside.pt").string(), cpu_options()); })
            .find(refusal) == std::string::npos);
}
