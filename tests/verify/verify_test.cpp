// `host verify` end to end: every check passes on the example configs (BatchNorm reported as
// "differs by design" for accumulation), and each check fails, naming itself, with exit
// kExitVerifyFailed, on the fixture component that carries the bug it is there to catch
// (tests/fixtures/verify_plugins, docs/verify.md).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

const std::string kFixture = "--config tests/verify/fixture.toml --plugin-dir '" +
                             std::string(TP_TEST_FIXTURE_PLUGIN_DIR) + "' ";

tp::test::HostRun verify(const std::string& name, const std::string& args) {
  const auto dir = tp::test::fresh_dir(name);
  return tp::test::run_host("verify " + args + " --output-dir '" + dir.string() + "'");
}

/// The result word ("PASS", "FAIL", "SKIP") of the table row of `check`, or "" without one.
std::string result_of(const std::string& output, const std::string& check) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(check + " ")) continue;
    std::istringstream words(line.substr(check.size()));
    std::string result;
    words >> result;
    return result;
  }
  return "";
}

/// The row of `check` and the indented lines under it.
std::string row_of(const std::string& output, const std::string& check) {
  const size_t start = output.find("\n" + check + " ");
  if (start == std::string::npos) return "";
  size_t end = start + 1;
  while ((end = output.find('\n', end + 1)) != std::string::npos && output.compare(end + 1, 4, "    ") == 0) {}
  return output.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

/// A 24-bit BMP of `h` x `w` (image_folder reads .bmp through OpenCV): a dim noise background
/// with a bright bar whose position and colour channel depend on `label`, so classes are learnable.
void write_bmp(const std::filesystem::path& file, int h, int w, int label, uint32_t seed) {
  const int row_bytes = (3 * w + 3) / 4 * 4;
  const uint32_t pixel_bytes = static_cast<uint32_t>(row_bytes * h);
  std::vector<uint8_t> out(54 + pixel_bytes, 0);
  auto put32 = [&out](std::size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  out[0] = 'B';
  out[1] = 'M';
  put32(2, static_cast<uint32_t>(out.size()));
  put32(10, 54);
  put32(14, 40);
  put32(18, static_cast<uint32_t>(w));
  put32(22, static_cast<uint32_t>(h));
  out[26] = 1;
  out[28] = 24;
  put32(34, pixel_bytes);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      seed = seed * 1664525u + 1013904223u;
      uint8_t* p = &out[54 + static_cast<std::size_t>(y * row_bytes + 3 * x)];
      for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>((seed >> (8 * c)) % 60);
      if ((x / 6) % 3 == label) p[label] = 220;
    }
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(out.data()),
                                              static_cast<std::streamsize>(out.size()));
}

/// root/{train,val}/{a,b,c}/*.bmp: 16 training and 6 validation images per class, 40 x 48.
std::filesystem::path write_image_folder(const std::string& name) {
  const std::filesystem::path root = tp::test::fresh_dir(name);
  uint32_t seed = 1;
  for (const auto& [split, count] : {std::pair<const char*, int>{"train", 16}, {"val", 6}})
    for (int label = 0; label < 3; ++label) {
      const std::filesystem::path dir = root / split / std::string(1, static_cast<char>('a' + label));
      std::filesystem::create_directories(dir);
      for (int i = 0; i < count; ++i) write_bmp(dir / (std::to_string(i) + ".bmp"), 40, 48, label, seed++);
    }
  return root;
}

}  // namespace

TEST_CASE("host verify passes on configs/quickstart.toml; BatchNorm differs by design in accumulation") {
  const auto run = verify("verify_quickstart", "--config configs/quickstart.toml --steps 2");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  for (const char* check :
       {"data", "loss", "metric", "gradients", "accumulation", "resume", "distributed", "overfit"}) {
    INFO(check);
    CHECK(result_of(run.output, check) == "PASS");
  }
  // small_cnn has BatchNorm: the live difference is reported, the exact check runs frozen.
  CHECK(row_of(run.output, "accumulation").find("differs by design") != std::string::npos);
  CHECK(row_of(run.output, "accumulation").find("freeze_bn_stats") != std::string::npos);
  // shapes augments by the per-sample seed, which mixes in the rank.
  CHECK(row_of(run.output, "distributed").find("differs by design") != std::string::npos);
  CHECK(run.output.find("8 passed, 0 failed, 0 skipped") != std::string::npos);
  // Without augmentation the 2-rank training is judged, and exact.
  const auto plain = verify("verify_quickstart_plain", "--config configs/quickstart.toml --steps 2 --checks distributed "
                                                       "--set data.train.augment=false");
  INFO(plain.output);
  CHECK(plain.exit_code == tp::kExitOk);
  CHECK(row_of(plain.output, "distributed").find("training differs by design") == std::string::npos);
}

TEST_CASE("host verify passes on configs/multi_input.toml and configs/multi_output.toml") {
  // Two inputs, two outputs: every field and output is split and compared. The overfit check,
  // which does not look at fields, runs on quickstart only (about 10 s each here).
  for (const char* config : {"multi_input", "multi_output"}) {
    const auto run = verify(std::string("verify_") + config,
                            std::string("--config configs/") + config +
                                ".toml --steps 2 --checks data,loss,metric,gradients,accumulation,resume,distributed");
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitOk);
    CHECK(run.output.find("7 passed, 0 failed, 0 skipped") != std::string::npos);
  }
}

TEST_CASE("host verify passes on every other built-in config") {
  // The image_folder configs need data: a small folder of 32-pixel crops instead of ImageNet's
  // 224, and no pretrained weights file (finetune's is the user's download).
  const std::filesystem::path images = write_image_folder("verify_images");
  const std::string folder = " --set data.train.root='\"" + (images / "train").string() +
                             "\"' --set data.train.val_root='\"" + (images / "val").string() +
                             "\"' --set model.num_classes=3 --set data.train.random_resized_crop=[32] "
                             "--set data.train.resize=[36] --set data.train.center_crop=[32] --set train.batch_size=8 "
                             "--set data.num_workers=1 --set run.device='\"cpu\"'";
  struct Case {
    const char* config;
    std::string sets;
    const char* summary;
    std::vector<std::pair<const char*, const char*>> says; // (check, a phrase of its row)
  };
  const Case cases[] = {
      {"reference", "", "8 passed, 0 failed, 0 skipped", {}},
      {"precision_experiment", "", "8 passed, 0 failed, 0 skipped", {}},
      // zero_init_residual: the layers before each block's last (zero-initialised) BatchNorm
      // weight get no gradient at the first step only.
      {"resnet18", " --set data.train.image_size=32", "8 passed, 0 failed, 0 skipped",
       {{"gradients", "32 get an all-zero gradient only at the first step"}}},
      // Mixup/CutMix blends: accumulation and overfit differ by design (SKIP, with the reason).
      {"recipe_resnet", folder + " --set 'data.batch_transforms[0].num_classes=3'", "6 passed, 0 failed, 2 skipped",
       {{"overfit", "[[data.batch_transforms]] blend every step's batch anew"}}},
      // Dropout and stochastic depth off for the exact comparisons; label smoothing off for
      // memorising (its floor, 0.5 here, is above 5% of the start).
      {"finetune_efficientnet_b0", folder + " --set 'train.init_weights=\"\"'", "8 passed, 0 failed, 0 skipped",
       {{"accumulation", "model.dropout=0.0, model.stochastic_depth_prob=0.0"},
        {"distributed", "model.dropout=0.0, model.stochastic_depth_prob=0.0"},
        {"overfit", "trained with loss.label_smoothing = 0"}}},
  };
  for (const Case& c : cases) {
#ifndef TP_TEST_HAS_ZOO
    if (std::string(c.config) == "finetune_efficientnet_b0") {
      MESSAGE("not checked: configs/finetune_efficientnet_b0.toml (this build has no efficientnet.so, TP_BUILD_ZOO=OFF)");
      continue;
    }
#endif
    const auto run = verify(std::string("verify_") + c.config,
                            std::string("--config configs/") + c.config + ".toml --steps 2" + c.sets);
    INFO(c.config, ":\n", run.output);
    CHECK(run.exit_code == tp::kExitOk);
    CHECK(run.output.find(c.summary) != std::string::npos);
    for (const auto& [check, phrase] : c.says) {
      INFO(check, ": ", phrase);
      CHECK(row_of(run.output, check).find(phrase) != std::string::npos);
    }
  }
}

TEST_CASE("the fixture's correct components pass every check") {
  const auto run = verify("verify_fixture_clean", kFixture + "--steps 2");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  CHECK(run.output.find("8 passed, 0 failed, 0 skipped") != std::string::npos);
}

TEST_CASE("each check fails on the bug it is there to catch") {
  struct Case {
    const char* check;
    const char* defect; // the --set that plants the bug
    const char* says;   // a phrase of the FAIL row
  };
  const Case cases[] = {
      {"data", "data.train.defect=\"random\"", "two reads with the same context differ"},
      {"data", "data.train.defect=\"worker\"", "differs when loader thread 2 of 3 reads it"},
      {"data", "data.train.defect=\"nan_sample\"", "NaN or Inf"},
      {"loss", "loss.defect=\"mean\"", "not a sum over its items"},
      {"loss", "loss.defect=\"zero_count\"", "must count its items"},
      {"metric", "metrics[0].defect=\"running_mean\"", "does not combine by SUM"},
      {"gradients", "model.defect=\"dead_parameter\"", "unused.weight"},
      {"gradients", "model.defect=\"nan_gradient\"", "get a NaN or Inf gradient: hidden.weight"},
      {"gradients", "model.defect=\"dead_relu\"", "get an all-zero gradient: hidden.weight"},
      {"accumulation", "loss.defect=\"mean\"", "max relative weight difference"},
      {"accumulation", "model.defect=\"batch_centering\"", "statistics over the batch outside BatchNorm"},
      {"resume", "model.defect=\"hidden_state\"", "max relative difference"},
      {"distributed", "metrics[0].defect=\"running_mean\"", "evaluation: val/accuracy"},
      {"distributed", "data.train.defect=\"self_sharding\"", "2 ranks must train like 1 process"},
      {"overfit", "model.defect=\"softmax_output\"", "at best"},
  };
  for (const Case& c : cases) {
    const auto run = verify(std::string("verify_fail_") + c.check,
                            kFixture + "--steps 2 --checks " + c.check + " --set '" + c.defect + "'");
    INFO(c.check, " with ", c.defect, ":\n", run.output);
    CHECK(run.exit_code == tp::kExitVerifyFailed);
    CHECK(result_of(run.output, c.check) == "FAIL");
    CHECK(row_of(run.output, c.check).find(c.says) != std::string::npos);
    CHECK(run.output.find("0 passed, 1 failed") != std::string::npos);
  }
}

TEST_CASE("an unknown --checks name is a usage error before anything loads") {
  const auto run = tp::test::run_host("verify --config configs/quickstart.toml --checks data,gradient");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitConfig);
  CHECK(run.output.find("unknown check 'gradient'") != std::string::npos);
  CHECK(run.output.find("gradients") != std::string::npos);
}
