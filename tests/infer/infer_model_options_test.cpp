// OpenOptions::model_options (C: tp_infer_open_configured): a service changes the options the
// export's model is built with, as torchvision's detectors take score_thresh, nms_thresh and
// detections_per_img at construction (dense trial F10: the export's evaluation score_thresh of 0.05
// answered up to 100 boxes per image, and nothing could change it). configs/detect_shapes.toml's
// FCOS, trained 2 steps and exported once per process. Each change is checked against the
// plugin's option schema as the export's own options are.
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "error_of.h"
#include "infer_support.h"

namespace {

namespace fs = std::filesystem;
using tp::test::error_of;
using tp::test::infer::cpu_options;
using Kind = tp::infer::Error::Kind;

const fs::path& detector_export() {
  static const fs::path exported = [] {
    const fs::path dir = tp::test::fresh_dir("infer_detector"), out = dir / "out", file = dir / "fcos.safetensors";
    const auto train = tp::test::run_host(
        "train --config '" + std::string(tp::test::source_dir()) + "/configs/detect_shapes.toml' --output-dir '" +
        out.string() + "' --set train.max_steps=2 --set train.batch_size=8 --set data.train.size=16 "
        "--set data.train.val_size=8 --set schedule.warmup_steps=1 --set eval.sanity_batches=0 --set run.threads=1");
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
    tp::test::infer::export_last_checkpoint(out, file);
    return file;
  }();
  return exported;
}

tp::infer::OpenOptions with_options(std::vector<std::string> changes) {
  tp::infer::OpenOptions options = cpu_options();
  options.model_options = std::move(changes);
  return options;
}

/// Two 96 x 96 images of values in [0, 1) that differ per pixel.
tp::infer::Tensor two_images() {
  tp::infer::Tensor images{"image", {2, 3, 96, 96}, std::vector<float>(2 * 3 * 96 * 96)};
  for (std::size_t i = 0; i < images.values.size(); ++i)
    images.values[i] = static_cast<float>((i * 7919 + 13) % 1009) / 1009.F;
  return images;
}

/// Each image's detection scores, from the ragged rows and their offsets.
std::vector<std::vector<float>> scores_per_image(const tp::infer::Batch& batch) {
  const tp::infer::Tensor& scores = batch.output("detection_scores");
  const tp::infer::Tensor& offsets = batch.output("detection_scores_offsets");
  std::vector<std::vector<float>> out;
  for (std::size_t i = 0; i + 1 < offsets.values.size(); ++i)
    out.emplace_back(scores.values.begin() + static_cast<std::ptrdiff_t>(offsets.values[i]),
                     scores.values.begin() + static_cast<std::ptrdiff_t>(offsets.values[i + 1]));
  return out;
}

}  // namespace

TEST_CASE("tp::infer model_options: a detector's serving threshold and box count replace the export's evaluation values") {
  const auto images = two_images();
  tp::infer::Model as_exported = tp::infer::Model::open(detector_export().string(), cpu_options());
  tp::infer::Model every = tp::infer::Model::open(detector_export().string(), with_options({"score_thresh=0.0"}));
  tp::infer::Model seven = tp::infer::Model::open(
      detector_export().string(), with_options({"score_thresh=0.0", "detections_per_img=50", "detections_per_img=7"}));
  const auto exported = scores_per_image(as_exported.run_tensors({images}));
  const auto all = scores_per_image(every.run_tensors({images}));
  const auto top = scores_per_image(seven.run_tensors({images}));
  REQUIRE(exported.size() == 2);
  REQUIRE(all.size() == 2);
  REQUIRE(top.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    for (const float score : exported[i]) CHECK(score >= 0.05F);  // the export's evaluation threshold
    CHECK(all[i].size() >= exported[i].size());
    CHECK(all[i].size() > 7);
    CHECK(all[i].size() <= 100);  // the export's detections_per_img
    REQUIRE(top[i].size() == 7);  // the later entry won
    // torchvision keeps the best-scored boxes after NMS: the first 7 rows of the unlimited answer.
    CHECK(std::vector<float>(all[i].begin(), all[i].begin() + 7) == top[i]);
  }
  // A serving threshold between the scores: only the boxes above it, the same ones.
  const float cut = all[0][all[0].size() / 2];
  tp::infer::Model strict =
      tp::infer::Model::open(detector_export().string(), with_options({"score_thresh=" + std::to_string(cut)}));
  const auto kept = scores_per_image(strict.run_tensors({images}));
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].size() < all[0].size());
  CHECK(!kept[0].empty());
  for (const float score : kept[0]) CHECK(score > cut - 1e-6F);
  CHECK(std::vector<float>(all[0].begin(), all[0].begin() + static_cast<std::ptrdiff_t>(kept[0].size())) == kept[0]);
}

TEST_CASE("tp::infer model_options: an unknown key or a wrong type is Setup naming the entry; a malformed entry BadInput") {
  const std::string file = detector_export().string();
  const std::string unknown = error_of([&] { (void)tp::infer::Model::open(file, with_options({"score_threshold=0.3"})); });
  CAPTURE(unknown);
  CHECK(unknown.find("score_threshold") != std::string::npos);
  CHECK(unknown.find("score_thresh") != std::string::npos);
  CHECK(unknown.find("OpenOptions::model_options") != std::string::npos);
  try {
    (void)tp::infer::Model::open(file, with_options({"detections_per_img=many"}));
    FAIL("a string for an integer option opened");
  } catch (const tp::infer::Error& e) {
    CHECK(e.kind() == Kind::Setup);
    CHECK(std::string(e.what()).find("detections_per_img=many") != std::string::npos);
  }
  for (const std::string bad : {"score_thresh", "=0.3", "model.score_thresh=0.3", "component=org.torchhost.resnet"}) {
    CAPTURE(bad);
    try {
      (void)tp::infer::Model::open(file, with_options({bad}));
      FAIL("opened");
    } catch (const tp::infer::Error& e) {
      CHECK(e.kind() == Kind::BadInput);
      CHECK(std::string(e.what()).find("OpenOptions::model_options entry \"" + bad + "\"") != std::string::npos);
    }
  }
}

TEST_CASE("tp::infer model_options: entries are trimmed as --set trims them, and a secret in one reaches no message") {
  const auto images = two_images();
  const std::string file = detector_export().string();
  tp::infer::Model spaced = tp::infer::Model::open(file, with_options({" score_thresh = 0.0 ", "detections_per_img =\t4"}));
  tp::infer::Model tight = tp::infer::Model::open(file, with_options({"score_thresh=0.0", "detections_per_img=4"}));
  const auto spaced_scores = scores_per_image(spaced.run_tensors({images}));
  REQUIRE(spaced_scores.size() == 2);
  CHECK(spaced_scores[0].size() == 4);
  CHECK(spaced_scores == scores_per_image(tight.run_tensors({images})));

  // A key holding a URI with a password: the refusal and the log show the URI without it.
  std::vector<std::string> lines;
  tp::infer::set_log([&](tp::infer::LogLevel, const std::string&, const std::string& line) { lines.push_back(line); },
                     tp::infer::LogLevel::Debug);
  const std::string unknown =
      error_of([&] { (void)tp::infer::Model::open(file, with_options({"weights_uri=http://alice:s3cret@h:5000/w"})); });
  const std::string malformed =
      error_of([&] { (void)tp::infer::Model::open(file, with_options({"http://alice:s3cret@h:5000/w"})); });
  // A value of the wrong type is described in the refusal, redacted as well (review finding).
  const std::string wrong_type =
      error_of([&] { (void)tp::infer::Model::open(file, with_options({"detections_per_img=http://alice:s3cret@h/w"})); });
  tp::infer::set_log(nullptr);
  CAPTURE(unknown);
  CAPTURE(malformed);
  CHECK(unknown.find("weights_uri") != std::string::npos);
  CHECK(unknown.find("http://***@h:5000/w") != std::string::npos);
  CHECK(malformed.find("http://***@h:5000/w") != std::string::npos);
  bool logged = false;
  for (const std::string& line : lines) {
    CAPTURE(line);
    CHECK(line.find("s3cret") == std::string::npos);
    logged = logged || line.find("weights_uri=http://***@h:5000/w") != std::string::npos;
  }
  CHECK(logged);
  CHECK(unknown.find("s3cret") == std::string::npos);
  CHECK(malformed.find("s3cret") == std::string::npos);
  CAPTURE(wrong_type);
  CHECK(wrong_type.find("detections_per_img") != std::string::npos);
  CHECK(wrong_type.find("http://***@h/w") != std::string::npos);
  CHECK(wrong_type.find("s3cret") == std::string::npos);
}

TEST_CASE("tp::infer C API: tp_infer_open_configured applies model options; a NULL entry is refused before anything opens") {
  const std::string file = detector_export().string();
  const char* changes[] = {"score_thresh=0.0", "detections_per_img=3"};
  tp_infer_model_t* model = nullptr;
  REQUIRE(tp_infer_open_configured(file.c_str(), "cpu", tp::test::plugin_dir(), 0, changes, 2, &model) == TP_OK);
  REQUIRE(model != nullptr);
  const auto images = two_images();
  tp_infer_result_t* result = nullptr;
  REQUIRE(tp_infer_run_tensor(model, "image", images.values.data(), images.shape.data(), 4, 1, &result) == TP_OK);
  const float* offsets = nullptr;
  for (uint32_t i = 0; i < tp_infer_result_output_count(result); ++i) {
    const char* name = nullptr;
    const int64_t* shape = nullptr;
    uint32_t ndim = 0;
    const float* values = nullptr;
    REQUIRE(tp_infer_result_output(result, i, &name, &shape, &ndim, &values) == TP_OK);
    if (std::string(name) != "detection_scores_offsets") continue;
    REQUIRE(ndim == 1);
    REQUIRE(shape[0] == 3);
    offsets = values;
  }
  REQUIRE(offsets != nullptr);
  CHECK(offsets[1] - offsets[0] == 3.F);
  CHECK(offsets[2] - offsets[1] == 3.F);
  tp_infer_result_free(result);
  tp_infer_close(model);

  const char* with_null[] = {"score_thresh=0.0", nullptr};
  model = nullptr;
  CHECK(tp_infer_open_configured(file.c_str(), "cpu", tp::test::plugin_dir(), 0, with_null, 2, &model) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(model == nullptr);
  CHECK(std::string(tp_infer_last_error()).find("model_options[1] is NULL") != std::string::npos);
  CHECK(tp_infer_open_configured(file.c_str(), "cpu", tp::test::plugin_dir(), 0, nullptr, 1, &model) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_infer_open_configured(file.c_str(), "cpu", tp::test::plugin_dir(), 0, nullptr, 0, &model) == TP_OK);
  tp_infer_close(model);
}
