// `host verify` passes on every configuration in configs/ besides quickstart and the
// multi-input/output ones (verify_test.cpp): reference, precision_experiment, resnet18,
// detect_shapes, and the image_folder recipes on a generated folder. About 100 s; the sanitizer gate leaves this entry out
// (label verify_configs): it runs the same host code as verify_test.cpp over larger models.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "verify_runner.h"

namespace {

using tp::test::row_of;
using tp::test::verify;

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
      // FCOS: the centre-ness BCE has a floor (its soft targets' entropy) and the GIoU term falls
      // slowly; fcos_loss declares both (plugin ABI 1.9), and its boxes' contract holds.
      {"detect_shapes", "", "8 passed, 0 failed, 0 skipped",
       {{"overfit", "'bbox_ctrness' has a floor"},
        {"overfit", "org.torchhost.fcos_loss declares its target, 25% of start"},
        {"data", "keeping the loss's field contracts"}}},
      {"finetune_efficientnet_b0", folder + " --set 'train.init_weights=\"\"'", "8 passed, 0 failed, 0 skipped",
       {{"accumulation", "model.dropout=0.0, model.stochastic_depth_prob=0.0"},
        {"distributed", "model.dropout=0.0, model.stochastic_depth_prob=0.0"},
        {"overfit", "trained with loss.label_smoothing = 0"}}},
  };
  for (const Case& c : cases) {
#ifndef TP_TEST_HAS_TASK_MODELS
    if (std::string(c.config) == "detect_shapes") {
      MESSAGE("not checked: configs/detect_shapes.toml (this build has no detection.so, TP_BUILD_TASK_MODELS=OFF)");
      continue;
    }
#endif
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
