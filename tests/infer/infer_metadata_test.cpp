// The inference library on what an export names besides its weights: class names only when one
// per class (as host predict's logits.class), warnings at open for a plugin file other than the
// training's and a missing preprocessing plugin, and the C API's class names, component and
// version. On the run of infer_support.h.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <doctest/doctest.h>

#include "integration/host_runner.h"
#include "support/class_folders.h"
#include "error_of.h"
#include "export_edits.h"
#include "infer_support.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"
#include "tp/version.h"


namespace {

namespace fs = std::filesystem;
using namespace tp::test::infer;
using tp::test::error_of;
using Kind = tp::infer::Error::Kind;

}  // namespace


TEST_CASE("tp::infer: class names only when the export names one per class, as host predict's logits.class") {
  const Exported& run = exported();
  // Three names for a two-class output (a run's num_classes above its folders, or an edited file):
  // host predict writes no name; the library named classes 0 and 1 from the wrong list.
  const fs::path three =
      with_metadata(run.exported, "torchhost.classes", nlohmann::json({"dark", "light", "extra"}).dump(),
                    run.dir / "three_names.safetensors");
  tp::infer::Model model = tp::infer::Model::open(three.string(), cpu_options());
  const tp::infer::Batch batch = model.run_files(run.files, 2);
  REQUIRE(batch.top.size() == run.files.size());
  for (const auto& scores : batch.top) {
    REQUIRE(scores.size() == 2);
    for (const tp::infer::ClassScore& score : scores) CHECK(score.name.empty());
  }
  // The unedited export names both, and the C API keeps every class for a top_k past INT_MAX
  // (was cast to -1 and refused).
  std::vector<const char*> paths;
  for (const std::string& file : run.files) paths.push_back(file.c_str());
  tp_infer_model_t* c_model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", tp::test::plugin_dir(), &c_model) == TP_OK);
  tp_infer_result_t* result = nullptr;
  const tp_status status = tp_infer_run_files(c_model, paths.data(), 1, UINT32_MAX, &result);
  INFO(tp_infer_last_error());
  REQUIRE(status == TP_OK);
  CHECK(tp_infer_result_class_count(result, 0) == 2);
  const char* name = nullptr;
  CHECK(tp_infer_result_class(result, 0, 1, nullptr, &name, nullptr) == TP_OK);
  CHECK((std::string(name) == "dark" || std::string(name) == "light"));
  tp_infer_result_free(result);
  tp_infer_close(c_model);
}

TEST_CASE("tp::infer: a model trained with a binary cross entropy (torchhost.scores = sigmoid) scores each class by its sigmoid") {
  const Exported& run = exported();
  const fs::path sigmoid = with_metadata(run.exported, "torchhost.scores", nlohmann::json("sigmoid").dump(),
                                             run.dir / "sigmoid.safetensors");
  for (const bool multi : {false, true}) {
    CAPTURE(multi);
    tp::infer::Model model = tp::infer::Model::open((multi ? sigmoid : run.exported).string(), cpu_options());
    const tp::infer::Batch batch = model.run_files(run.files, 2);
    const tp::infer::Tensor& logits = batch.output("logits");
    REQUIRE(logits.shape.size() == 2);
    const auto classes = static_cast<std::size_t>(logits.shape[1]);
    for (std::size_t image = 0; image < batch.top.size(); ++image) {
      float sum = 0;
      for (const tp::infer::ClassScore& score : batch.top[image]) {
        const float logit = logits.values[image * classes + static_cast<std::size_t>(score.index)];
        if (multi) CHECK(score.probability == doctest::Approx(1.0 / (1.0 + std::exp(-logit))).epsilon(1e-6));
        sum += score.probability;
      }
      if (!multi) CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));  // softmax over every class
    }
  }
}

namespace {

// The library file the export names for `component` (torchhost.plugin_files).
std::string library_of(const fs::path& exported, const std::string& component) {
  std::ifstream in(exported, std::ios::binary);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8); // little-endian, as this machine
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  const auto metadata = nlohmann::json::parse(header)["__metadata__"];
  for (const auto& plugin : nlohmann::json::parse(metadata["torchhost.plugin_files"].get<std::string>()))
    for (const auto& id : plugin["components"])
      if (id.get<std::string>().starts_with(component + "@")) return plugin["library"].get<std::string>();
  return "";
}

}  // namespace

// A deployment trial: a plugin file changed since training built the network with no word at any
// log level, and a plugin directory without the dataset plugin opened fine and failed each
// run_files with "no dataset component ... is loaded", which named no directory.
TEST_CASE("tp::infer: open warns about a plugin file other than the training's and a missing preprocessing plugin") {
  const Exported& run = exported();
  const std::string model_library = library_of(run.exported, "org.torchhost.small_cnn");
  const std::string data_library = library_of(run.exported, "org.torchhost.image_folder");
  REQUIRE_FALSE(model_library.empty());
  REQUIRE_FALSE(data_library.empty());

  // The training's own files: not a word.
  std::vector<float> expected;
  const std::string same = stderr_of(run.dir / "same.err", [&] {
    expected = tp::infer::Model::open(run.exported.string(), cpu_options()).run_files({run.files[0]}, 1).output("logits").values;
  });
  CHECK(same.find("warning") == std::string::npos);

  // Both libraries rebuilt (bytes appended: the same code, another SHA-256).
  const fs::path modified = run.dir / "modified_plugins";
  fs::create_directories(modified);
  fs::copy_file(fs::path(tp::test::plugin_dir()) / model_library, modified / model_library,
                fs::copy_options::overwrite_existing);
  fs::copy_file(fs::path(tp::test::plugin_dir()) / data_library, modified / data_library,
                fs::copy_options::overwrite_existing);
  std::ofstream(modified / model_library, std::ios::app | std::ios::binary) << "rebuilt";
  std::ofstream(modified / data_library, std::ios::app | std::ios::binary) << "rebuilt";
  std::vector<float> logits;
  const std::string changed = stderr_of(run.dir / "changed.err", [&] {
    logits = tp::infer::Model::open(run.exported.string(), {.device = "cpu", .plugin_dirs = {modified.string()}})
                 .run_files({run.files[0]}, 1)
                 .output("logits")
                 .values;
  });
  INFO(changed);
  CHECK(changed.find((modified / model_library).string() + " (org.torchhost.small_cnn) is not the file the export") !=
        std::string::npos);
  CHECK(changed.find((modified / data_library).string() + " (org.torchhost.image_folder) is not the file the export") !=
        std::string::npos);
  CHECK(logits == expected); // warned, not refused: the code is the same here

  // Without the dataset's library: a warning at open, and run_files names the directories.
  const fs::path model_only = run.dir / "model_only_plugins";
  fs::create_directories(model_only);
  fs::copy_file(fs::path(tp::test::plugin_dir()) / model_library, model_only / model_library,
                fs::copy_options::overwrite_existing);
  std::string message;
  const std::string missing = stderr_of(run.dir / "missing.err", [&] {
    message = error_of([&] {
      tp::infer::Model::open(run.exported.string(), {.device = "cpu", .plugin_dirs = {model_only.string()}})
          .run_files({run.files[0]}, 1);
    });
  });
  INFO(missing);
  INFO(message);
  CHECK(missing.find("reads images with 'org.torchhost.image_folder', which no library in the plugin directories (" +
                     model_only.string() + ") provides") != std::string::npos);
  CHECK(message.find("which no library in the plugin directories (" + model_only.string() + ") provides") !=
        std::string::npos);
  CHECK(message.find("run_tensors") != std::string::npos);
}

// A deployment trial's ctypes tool parsed the safetensors header itself to list the classes: the C
// API had no call for them, the component or the library's version.
TEST_CASE("tp::infer C API: the export's class names, its component and the library's version") {
  const Exported& run = exported();
  uint32_t count = 0;
  char name[64] = {0}, component[64] = {0};
  int nulls_refused = 0;
  REQUIRE(infer_c_metadata(run.exported.string().c_str(), tp::test::plugin_dir(), 1, &count, name, sizeof name,
                           component, sizeof component, &nulls_refused) == TP_OK);
  const tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  REQUIRE(model.class_names().size() == 2);
  CHECK(count == 2);
  CHECK(std::string(name) == model.class_names()[1]);
  CHECK(std::string(name) == "light"); // the folders' classes, sorted: dark, light
  CHECK(std::string(component) == "org.torchhost.small_cnn");
  CHECK(nulls_refused == 1);
  const std::string version = tp_infer_version();
  CHECK(version == tp::infer::version());
  CHECK(version.starts_with("torchhost "));
  CHECK(version.find("; plugin ABI " + std::to_string(TP_ABI_MAJOR) + "." + std::to_string(TP_ABI_MINOR)) !=
        std::string::npos);
  CHECK(version.find("; LibTorch ") != std::string::npos);
  CHECK(version.find('\n') == std::string::npos);
}

TEST_CASE("tp::infer: a cut, empty or garbage-headed export is named damaged or truncated, with its sizes") {
  // Deployment trial F5: each was "not a model `host export` wrote ... Export with this host".
  const Exported& run = exported();
  std::ifstream in(run.exported, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  const auto message_for = [&](const std::string& name, const std::string& content) {
    std::ofstream(run.dir / name, std::ios::binary) << content;
    const std::string message = error_of([&] { tp::infer::Model::open((run.dir / name).string(), cpu_options()); });
    INFO(message);
    CHECK(message.find("is damaged or truncated") != std::string::npos);
    CHECK(message.find("not a model `host export` wrote") == std::string::npos);
    return message;
  };
  CHECK(message_for("cut.safetensors", bytes.substr(0, 100))
            .find("it holds 100 bytes, and its header says " + std::to_string(length) + " bytes") != std::string::npos);
  CHECK(message_for("empty.safetensors", "").find("it holds 0 bytes, less than the 8") != std::string::npos);
  std::string huge(8, '\0');
  huge[7] = 0x40; // 2^62
  CHECK(message_for("huge.safetensors", huge + "{}").find("its header says 4611686018427387904 bytes") !=
        std::string::npos);
  std::string garbage(8, '\0');
  garbage[0] = 4;
  CHECK(message_for("garbage.safetensors", garbage + "{{{{").find("is not a JSON object") != std::string::npos);
}

TEST_CASE("tp::infer: an export of another metadata format is refused; a newer LibTorch or plugin ABI is named") {
  // Serving trial F3: torchhost.format 2, 7 and "banana" opened and answered without a word.
  const Exported& run = exported();
  for (const std::string format : {"2", "7", "banana"}) {
    CAPTURE(format);
    const fs::path file = with_metadata(run.exported, "torchhost.format", format, run.dir / ("format_" + format + ".safetensors"));
    std::string message;
    const Kind kind = [&] {
      try {
        tp::infer::Model::open(file.string(), cpu_options());
      } catch (const tp::infer::Error& e) {
        message = e.what();
        return e.kind();
      }
      return Kind::Internal;
    }();
    INFO(message);
    CHECK(message.find("declares the metadata format '" + format + "' (torchhost.format)") != std::string::npos);
    CHECK(message.find("this library reads format 1") != std::string::npos);
    CHECK(message.find("export the run again with a host that writes format 1") != std::string::npos);
    CHECK(kind == Kind::Setup);
  }
  // Format 1, and no format at all (exports of hosts before the key existed), open.
  CHECK(tp::infer::Model::open(run.exported.string(), cpu_options()).metadata().at("torchhost.format") == "1");
  const fs::path unversioned = with_header(run.exported, run.dir / "no_format.safetensors", [](const std::string& header) {
    nlohmann::json json = nlohmann::json::parse(header);
    json["__metadata__"].erase("torchhost.format");
    return json.dump();
  });
  CHECK(error_of([&] { tp::infer::Model::open(unversioned.string(), cpu_options()); }).empty());

  // A newer LibTorch and plugin ABI: warnings naming both versions; the model still opens.
  fs::path future = with_metadata(run.exported, "torchhost.libtorch", "3.1.0", run.dir / "future_tmp.safetensors");
  future = with_metadata(future, "torchhost.plugin_abi", "2.0", run.dir / "future.safetensors");
  std::string message;
  const std::string log = stderr_of(run.dir / "future.err", [&] {
    message = error_of([&] { tp::infer::Model::open(future.string(), cpu_options()); });
  });
  INFO(log);
  CHECK(message.empty());
  CHECK(log.find("LibTorch 3.1.0 (torchhost.libtorch), newer than this library's") != std::string::npos);
  CHECK(log.find("plugin ABI 2.0 (torchhost.plugin_abi), newer than this library's " + std::to_string(TP_ABI_MAJOR) +
                 "." + std::to_string(TP_ABI_MINOR)) != std::string::npos);
  // The export's own versions are this build's: no warning.
  const std::string quiet = stderr_of(run.dir / "own.err", [&] { tp::infer::Model::open(run.exported.string(), cpu_options()); });
  CHECK(quiet.find("newer than this library's") == std::string::npos);
}
