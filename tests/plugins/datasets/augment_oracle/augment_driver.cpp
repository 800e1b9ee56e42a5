// The C++ side of the torchvision oracle for image_folder's augmentation (augment_oracle.py is
// the other side). Links only the plugin's augment sources, its pipeline and OpenCV: no LibTorch,
// no framework. Commands (all output on stdout, one line per request):
//   ops <in.png>              stdin lines `<rand|wide> <Op> <bin> <sign> <out.png>`: applies the op
//                             at that table bin (sign -1 negates), writes out.png, prints the
//                             signed magnitude used (%.17g)
//   erase <H> <W> <p> <scale_lo> <scale_hi> <ratio_lo> <ratio_hi> <seed>...
//                             per seed: `u_apply u[0][0] .. u[9][3] erase i j h w`
//   pipeline <in.png> <out.f32> <seed> <rand N M | wide | none> <hflip> <erase_p> <zero|random>
//                             load_image with mean 0.5 / std 0.25; writes CHW floats; prints
//                             `flip <0|1>`, then `op <Op> <magnitude>` per op, then
//                             `box <erase> <i> <j> <h> <w>`
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "augment_policy.h"
#include "image_pipeline.h"
#include "random_erasing.h"
#include "rng.h"

namespace ds = tp::datasets;

namespace {

bool op_from_name(const std::string& name, ds::AugOp* out) {
  for (int i = 0; i < ds::kAugOpCount; ++i) {
    if (name == ds::aug_op_name(static_cast<ds::AugOp>(i))) {
      *out = static_cast<ds::AugOp>(i);
      return true;
    }
  }
  return false;
}

int run_ops(const std::string& in_path) {
  const cv::Mat img = cv::imread(in_path, cv::IMREAD_COLOR);
  if (img.empty()) return std::fprintf(stderr, "cannot read %s\n", in_path.c_str()), 2;
  std::string policy, name, out_path;
  int bin = 0, sign = 1;
  while (std::cin >> policy >> name >> bin >> sign >> out_path) {
    ds::AugOp op{};
    if (!op_from_name(name, &op)) return std::fprintf(stderr, "unknown op %s\n", name.c_str()), 2;
    double m = ds::aug_magnitude(policy == "wide", op, bin, img.rows, img.cols);
    if (sign < 0) m = -m;
    if (!cv::imwrite(out_path, ds::apply_aug_op(img, op, m))) return 2;
    std::printf("%.17g\n", m);
  }
  return 0;
}

int run_erase(char** a, int n) {
  ds::ErasingOptions o;
  const int h = std::atoi(a[0]), w = std::atoi(a[1]);
  o.p = std::atof(a[2]);
  o.scale = {std::atof(a[3]), std::atof(a[4])};
  o.ratio = {std::atof(a[5]), std::atof(a[6])};
  for (int k = 7; k < n; ++k) {
    const ds::EraseDraws d = ds::erase_draws(std::strtoull(a[k], nullptr, 10));
    const ds::EraseBox b = ds::box_from_draws(o, h, w, d);
    std::printf("%.17g", d.u_apply);
    for (const auto& attempt : d.u)
      for (double u : attempt) std::printf(" %.17g", u);
    std::printf(" %d %d %d %d %d\n", b.erase ? 1 : 0, b.i, b.j, b.h, b.w);
  }
  return 0;
}

int run_pipeline(char** a, int n) {
  ds::TransformOptions o;
  o.random = true;
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {0.25f, 0.25f, 0.25f};
  const uint64_t seed = std::strtoull(a[2], nullptr, 10);
  int k = 3;
  const std::string kind = a[k++];
  if (kind == "rand") {
    o.augment.kind = ds::AugmentOptions::Kind::kRandAugment;
    o.augment.num_ops = std::atoi(a[k++]);
    o.augment.magnitude = std::atoi(a[k++]);
  } else if (kind == "wide") {
    o.augment.kind = ds::AugmentOptions::Kind::kTrivialAugmentWide;
  }
  if (k + 3 > n) return std::fprintf(stderr, "pipeline: missing arguments\n"), 2;
  o.hflip = std::atof(a[k++]);
  o.erasing.p = std::atof(a[k++]);
  o.erasing.random_value = std::string(a[k++]) == "random";
  const ds::Image out = ds::load_image(a[0], o, seed);
  std::ofstream(a[1], std::ios::binary)
      .write(reinterpret_cast<const char*>(out.pixels.data()), static_cast<std::streamsize>(out.pixels.size() * 4));
  // The plan, recomputed from the same seed with the same functions load_image calls.
  std::printf("flip %d\n", o.hflip > 0.0 && ds::Rng(seed, ds::kTagFlip).uniform() < o.hflip ? 1 : 0);
  for (const ds::AugStep& s : ds::plan_augment(o.augment, out.h, out.w, seed))
    std::printf("op %s %.17g\n", ds::aug_op_name(s.op), s.magnitude);
  const ds::EraseBox b = ds::box_from_draws(o.erasing, out.h, out.w, ds::erase_draws(seed));
  std::printf("box %d %d %d %d %d\n", b.erase ? 1 : 0, b.i, b.j, b.h, b.w);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "ops" && argc == 3) return run_ops(argv[2]);
    if (cmd == "erase" && argc >= 10) return run_erase(argv + 2, argc - 2);
    if (cmd == "pipeline" && argc >= 8) return run_pipeline(argv + 2, argc - 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "augment_driver: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: augment_driver ops|erase|pipeline ... (see the file's header)\n");
  return 2;
}
