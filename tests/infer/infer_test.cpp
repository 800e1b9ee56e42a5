// The inference library (infer/, docs/deployment.md section 4) against `host`: a
// tiny image_folder run trained, exported and predicted with `host predict --images`; the library
// opens the export alone (the plugins from the build's plugin directory) and its answers for the
// same files equal the host's bit for bit (the csv writes each float as the shortest text that
// reads back to it). eval.batch_size is the number of files, so both run the model on the same
// batch. Then its errors, the C API, concurrent callers, several models open at once and closing.
// What the export names (classes, plugins, version): infer_metadata_test.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <doctest/doctest.h>

#include "integration/host_runner.h"
#include "support/class_folders.h"
#include "error_of.h"
#include "infer_support.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"
#include "tp/version.h"


namespace {

namespace fs = std::filesystem;
using namespace tp::test::infer;
using tp::test::error_of;

}  // namespace

TEST_CASE("tp::infer: the outputs, classes and probabilities of host predict --images, bit for bit") {
  const Exported& run = exported();
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  CHECK(model.component() == "org.torchhost.small_cnn");
  CHECK(model.class_names() == std::vector<std::string>{"dark", "light"});
  const tp::infer::Batch batch = model.run_files(run.files, 2);
  const tp::infer::Tensor& logits = batch.output("logits");
  REQUIRE(logits.shape == std::vector<int64_t>{6, 2});
  REQUIRE(batch.top.size() == 6);
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    INFO(run.rows[i].path);
    CHECK(logits.values[2 * i] == run.rows[i].logits[0]);
    CHECK(logits.values[2 * i + 1] == run.rows[i].logits[1]);
    REQUIRE(batch.top[i].size() == 2);
    CHECK(batch.top[i][0].name == run.rows[i].name);
    CHECK(batch.top[i][0].probability == run.rows[i].probability);
    CHECK(batch.top[i][0].probability + batch.top[i][1].probability == doctest::Approx(1.0));
  }
  // The same files' bytes decode as the files do.
  std::vector<std::vector<unsigned char>> bytes;
  for (const std::string& file : run.files) {
    std::ifstream in(file, std::ios::binary);
    bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const tp::infer::Batch from_bytes = model.run_encoded(bytes, 2);
  CHECK(from_bytes.output("logits").values == logits.values);
  REQUIRE(from_bytes.top.size() == 6);
  CHECK(from_bytes.top[5][0].probability == batch.top[5][0].probability);
  // Prepared tensors run the same network, at any batch size.
  const tp::infer::Batch zeros = model.run_tensors({{"image", {2, 3, 32, 32}, std::vector<float>(2 * 3 * 32 * 32)}}, 1);
  CHECK(zeros.output("logits").shape == std::vector<int64_t>{2, 2});
  CHECK(zeros.top.size() == 2);
}

TEST_CASE("tp::infer: bad input is an Error naming what and what to do") {
  const Exported& run = exported();
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  const fs::path corrupt = run.dir / "corrupt.png";
  std::ofstream(corrupt) << "not a png";
  std::string message = error_of([&] { model.run_files({run.files[0], corrupt.string()}); });
  INFO(message);
  CHECK(message.find("corrupt.png") != std::string::npos);
  message = error_of([&] { model.run_encoded({{0x89, 'P', 'N', 'G'}, {'n', 'o'}}); });
  INFO(message);
  CHECK(message.find("encoded image 0") != std::string::npos);
  CHECK(message.find("tp_infer.") == std::string::npos); // no temporary path
  message = error_of([&] { model.run_tensors({{"image", {2, 3}, std::vector<float>(6)}}); });
  INFO(message);
  CHECK(!message.empty());
  message = error_of([&] { model.run_tensors({{"image", {2, 3, 32, 32}, std::vector<float>(5)}}); });
  CHECK(message.find("has 5 values for the shape [2, 3, 32, 32]") != std::string::npos);
  CHECK(error_of([&] { model.run_files({}); }).find("no file") != std::string::npos);
  CHECK(error_of([&] { model.run_files({run.files[0], ""}); }).find("path 1 is empty") != std::string::npos);
  // No temporary directory: the library's own message naming TMPDIR (was a raw filesystem error).
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string saved = tmpdir != nullptr ? tmpdir : "";
  ::setenv("TMPDIR", (run.dir / "no_such_dir").c_str(), 1);
  message = error_of([&] { model.run_encoded({{0x89, 'P', 'N', 'G'}}); });
  if (tmpdir != nullptr) ::setenv("TMPDIR", saved.c_str(), 1); else ::unsetenv("TMPDIR");
  INFO(message);
  CHECK(message.find("no temporary directory for encoded images: TMPDIR is '" + (run.dir / "no_such_dir").string()) !=
        std::string::npos);
  // A typo's thread count: taken before, then every call failed with "could not create a primitive".
  CHECK(error_of([&] { model.set_threads(100000); }).find("a count below 1024") != std::string::npos);
  // The model still answers after refusals.
  CHECK(model.run_files({run.files[0]}, 1).top.size() == 1);
}

TEST_CASE("tp::infer: several models open at once share the plugins, and each closes alone") {
  const Exported& run = exported();
  const auto logits_of = [&](tp::infer::Model& model) { return model.run_files(run.files, 1).output("logits").values; };
  // Through a link to the plugin directory too: the same files, so the same loaded libraries.
  const fs::path linked = run.dir / "linked_plugins";
  if (!fs::exists(linked)) fs::create_directory_symlink(tp::test::plugin_dir(), linked);
  std::vector<float> alone;
  {
    tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
    alone = logits_of(model);
  }
  auto first = std::make_unique<tp::infer::Model>(tp::infer::Model::open(run.exported.string(), cpu_options()));
  tp::infer::Model second = tp::infer::Model::open(run.exported.string(), {.device = "cpu", .plugin_dirs = {linked.string()}});
  tp::infer::Model third = tp::infer::Model::open(run.exported.string(), cpu_options());
  // Three models on three threads at once answer as one model alone does.
  std::vector<std::vector<float>> answers(3);
  {
    std::vector<std::thread> callers;
    tp::infer::Model* models[] = {first.get(), &second, &third};
    for (std::size_t t = 0; t < answers.size(); ++t)
      callers.emplace_back([&, t] { answers[t] = logits_of(*models[t]); });
    for (std::thread& caller : callers) caller.join();
  }
  for (const std::vector<float>& answer : answers) CHECK(answer == alone);
  // Closing one leaves the others' plugins and the host table alive: the dataset plugin still
  // reports a corrupt file through it (a destroyed table would be a use after free, which the
  // sanitizer gate catches; infer_share_tests checks the libraries' lifetime itself).
  first.reset();
  CHECK(logits_of(second) == alone);
  const fs::path corrupt = run.dir / "corrupt_shared.png";
  std::ofstream(corrupt) << "not a png";
  const std::string message = error_of([&] { second.run_files({corrupt.string()}); });
  INFO(message);
  CHECK(message.find("corrupt_shared.png") != std::string::npos);
  { const tp::infer::Model closing = std::move(second); }
  // A moved-from Model refuses every call with an Error, never a crash.
  // NOLINTBEGIN(bugprone-use-after-move): that misuse is what is checked
  CHECK(error_of([&] { second.run_files(run.files); }).find("this Model was moved from") != std::string::npos);
  CHECK(error_of([&] { second.run_encoded({{0x89}}); }).find("this Model was moved from") != std::string::npos);
  CHECK(error_of([&] { second.class_names(); }).find("this Model was moved from") != std::string::npos);
  // NOLINTEND(bugprone-use-after-move)
  CHECK(logits_of(third) == alone);
  { const tp::infer::Model closing = std::move(third); }
  // After the last has closed, the plugins load afresh for the next model.
  tp::infer::Model again = tp::infer::Model::open(run.exported.string(), cpu_options());
  CHECK(logits_of(again) == alone);
}

TEST_CASE("tp::infer: opening fails with a paragraph naming what and what to do") {
  const Exported& run = exported();
  std::string message;

  const fs::path empty_dir = run.dir / "no_plugins";
  fs::create_directories(empty_dir);
  message = error_of([&] { tp::infer::Model::open(run.exported.string(), {.plugin_dirs = {empty_dir.string()}}); });
  INFO(message);
  CHECK(message.find("the export's model 'org.torchhost.small_cnn' is built by its plugin") != std::string::npos);
  CHECK(message.find("OpenOptions::plugin_dirs") != std::string::npos);
  message = error_of([&] { tp::infer::Model::open((run.dir / "run.toml").string(), cpu_options()); });
  CHECK(message.find("is not a model `host export` wrote") != std::string::npos);
  message = error_of([&] { tp::infer::Model::open((run.dir / "missing.safetensors").string(), cpu_options()); });
  CHECK(message.find("cannot read the export") != std::string::npos);
  CHECK(message.find("No such file or directory") != std::string::npos);
  message = error_of([&] { tp::infer::Model::open(run.dir.string(), cpu_options()); });
  CHECK(message.find("'" + run.dir.string() + "' is a directory") != std::string::npos);
  message = error_of([&] { tp::infer::Model::open(run.exported.string(), {.device = "tpu", .plugin_dirs = {"x"}}); });
  CHECK(message.find("is not a device") != std::string::npos);
  const fs::path missing_dir = run.dir / "no_such_plugins";
  message = error_of([&] { tp::infer::Model::open(run.exported.string(), {.plugin_dirs = {missing_dir.string()}}); });
  CHECK(message.find("'" + missing_dir.string() + "' (from OpenOptions::plugin_dirs) does not exist") !=
        std::string::npos);
}

TEST_CASE("tp::infer C API: the same classes and logits; failures return a status and a message") {
  const Exported& run = exported();
  std::vector<const char*> paths;
  for (const std::string& file : run.files) paths.push_back(file.c_str());
  std::vector<int64_t> classes(6);
  std::vector<float> probabilities(6), logits(12);
  const tp_status status = infer_c_classify(run.exported.c_str(), tp::test::plugin_dir(), paths.data(), 6,
                                            classes.data(), probabilities.data(), logits.data(), 12);
  INFO(tp_infer_last_error());
  REQUIRE(status == TP_OK);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK((classes[i] == 0 ? "dark" : "light") == run.rows[i].name);
    CHECK(probabilities[i] == run.rows[i].probability);
    CHECK(logits[2 * i] == run.rows[i].logits[0]);
    CHECK(logits[2 * i + 1] == run.rows[i].logits[1]);
  }
  std::ifstream in(run.files[5], std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  int64_t encoded_class = -1;
  float encoded_probability = 0.F;
  REQUIRE(infer_c_encoded(run.exported.c_str(), tp::test::plugin_dir(), bytes.data(), bytes.size(), &encoded_class,
                          &encoded_probability) == TP_OK);
  CHECK((encoded_class == 0 ? "dark" : "light") == run.rows[5].name);
  CHECK(encoded_probability == run.rows[5].probability);
  int model_is_null = 0;
  CHECK(infer_c_open_fails((run.dir / "run.toml").c_str(), tp::test::plugin_dir(), &model_is_null) == TP_ERR_CONFIG);
  CHECK(model_is_null == 1);
  CHECK(std::string(tp_infer_last_error()).find("is not a model `host export` wrote") != std::string::npos);
  CHECK(tp_infer_open(nullptr, nullptr, nullptr, nullptr) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("out_model") != std::string::npos);
  CHECK(tp_infer_result_output_count(nullptr) == 0);
  tp_infer_close(nullptr);
  tp_infer_result_free(nullptr);

  // plugin_dir may list several directories, ':'-separated (an empty one here, then the plugins).
  const fs::path empty_dir = run.dir / "no_plugins_c";
  fs::create_directories(empty_dir);
  const std::string dirs = empty_dir.string() + "::" + tp::test::plugin_dir();
  tp_infer_model_t* model = nullptr;
  REQUIRE(tp_infer_open(run.exported.c_str(), "cpu", dirs.c_str(), &model) == TP_OK);
  tp_infer_result_t* result = nullptr;
  CHECK(tp_infer_run_files(model, paths.data(), 0, 1, &result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("`count` is 0") != std::string::npos);
  CHECK(result == nullptr);
  const int64_t no_element[] = {0, 3, 32, 32};
  const float value = 0.F;
  CHECK(tp_infer_run_tensor(model, "image", &value, no_element, 4, 1, &result) == TP_ERR_INVALID_ARGUMENT);
  CHECK(std::string(tp_infer_last_error()).find("holds no element") != std::string::npos);
  REQUIRE(tp_infer_run_files(model, paths.data(), 1, 1, &result) == TP_OK);
  const char* name = nullptr;
  CHECK(tp_infer_result_class(result, 0, 0, nullptr, &name, nullptr) == TP_OK);
  CHECK(std::string(name) == run.rows[0].name);
  CHECK(tp_infer_result_class(result, 1, 0, nullptr, &name, nullptr) == TP_ERR_OUT_OF_RANGE);
  tp_infer_result_free(result);
  tp_infer_close(model);
}

TEST_CASE("tp::infer: concurrent callers on one model get what one caller gets") {
  const Exported& run = exported();
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), cpu_options());
  const std::vector<float> alone = model.run_files(run.files, 1).output("logits").values;
  constexpr int kThreads = 4, kRounds = 3;
  std::vector<std::vector<std::vector<float>>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round)
        seen[t].push_back(model.run_files(run.files, 1).output("logits").values);
    });
  for (std::thread& thread : threads) thread.join();
  for (const auto& rounds : seen)
    for (const std::vector<float>& values : rounds) CHECK(values == alone);
}

TEST_CASE("tp::infer: the export serves without the training data (its roots gone), as on another machine") {
  const Exported& run = exported();
  const fs::path elsewhere = run.dir / "deployed";
  fs::create_directories(elsewhere);
  std::vector<std::string> copies;
  for (std::size_t i = 0; i < run.files.size(); ++i) {
    copies.push_back((elsewhere / ("image_" + std::to_string(i) + ".png")).string());
    fs::copy_file(run.files[i], copies.back(), fs::copy_options::overwrite_existing);
  }
  fs::rename(run.dir / "train", run.dir / "train.away");
  fs::rename(run.dir / "val", run.dir / "val.away");
  std::vector<float> logits;
  std::string message;
  try {
    logits = tp::infer::Model::open(run.exported.string(), cpu_options()).run_files(copies, 1).output("logits").values;
  } catch (const tp::infer::Error& e) {
    message = e.what();
  }
  fs::rename(run.dir / "train.away", run.dir / "train");
  fs::rename(run.dir / "val.away", run.dir / "val");
  INFO(message);
  REQUIRE(message.empty());
  REQUIRE(logits.size() == 12);
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    CHECK(logits[2 * i] == run.rows[i].logits[0]);
    CHECK(logits[2 * i + 1] == run.rows[i].logits[1]);
  }
}

TEST_CASE("tp::infer: closing a model waits for the calls in flight on it; one begun meanwhile is refused") {
  const Exported& run = exported();
  // A long batch of another model holds the process's turn throughout. Early callers queue for
  // it before the model closes (in flight: closing waits for them); late callers begin while the
  // closing waits for the turn itself, to destroy the model's plugin: they woke in its freed state.
  tp::infer::Model holder = tp::infer::Model::open(run.exported.string(), cpu_options());
  auto closing = std::make_unique<tp::infer::Model>(tp::infer::Model::open(run.exported.string(), cpu_options()));
  tp::infer::Model* const model = closing.get(); // the callers' handle, as a C caller's pointer
  const std::vector<float> alone = model->run_files(run.files, 1).output("logits").values;
  std::vector<std::string> many;
  for (int copy = 0; copy < 4000; ++copy) many.insert(many.end(), run.files.begin(), run.files.end());
  std::atomic<bool> holding{false}, held{false};
  std::thread hold([&] {
    holding = true;
    (void)holder.run_files(many, 1);
    held = true;
  });
  const auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); };
  while (!holding) std::this_thread::yield();
  pause();
  constexpr int kEarly = 2, kLate = 2;
  std::vector<std::string> outcome(kEarly + kLate);
  const auto call = [&](int t) {
    try {
      outcome[t] = model->run_files(run.files, 1).output("logits").values == alone ? "same" : "other logits";
    } catch (const tp::infer::Error& e) {
      outcome[t] = e.what();
    }
  };
  std::vector<std::thread> callers;
  for (int t = 0; t < kEarly; ++t) callers.emplace_back(call, t);
  pause();
  std::thread closer([&] { closing.reset(); }); // returns once the calls in flight have
  pause();
  // A call begun after the close returned would use freed memory, whatever the library does: the
  // late callers call only while the holding batch still runs (the close cannot have returned).
  bool late_in_time = !held;
  for (int t = kEarly; t < kEarly + kLate && late_in_time; ++t) callers.emplace_back(call, t);
  for (std::thread& caller : callers) caller.join();
  closer.join();
  hold.join();
  REQUIRE_MESSAGE(late_in_time, "the holding batch ended before the late callers began; give it more files");
  for (int t = 0; t < kEarly; ++t) {
    INFO(outcome[t]);
    CHECK((outcome[t] == "same" || outcome[t].find("is being closed") != std::string::npos));
  }
  for (int t = kEarly; t < kEarly + kLate; ++t) {
    INFO(outcome[t]);
    CHECK(outcome[t].find("is being closed; a call must not overlap closing it") != std::string::npos);
  }
  CHECK(holder.run_files(run.files, 1).output("logits").values == alone);
}
