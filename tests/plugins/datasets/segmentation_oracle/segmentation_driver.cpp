// The C++ side of the torchvision oracle for segmentation_folder's joint transforms
// (segmentation_oracle.py is the other side). Links only the plugin's transform and mask sources,
// the image datasets' shared pixel_io (tp_image_common) and OpenCV: no LibTorch, no framework. One command:
//   <image.png> <mask.png> <seed> <out_image.png> <out_mask.png> <out.f32> [key=value]...
//   keys: train=0|1, resize=s | resize=h,w, random_resize=min,max, rrc=h,w, crop=h,w, hflip=p,
//         jitter=b,c,s (mean 0.5, std 0.25 always)
// Reads the mask as palette / grey class ids (mask_png), runs the plan and the geometry, writes
// the 8-bit image after the geometric steps (mirrored) and the mask as PNGs, the whole sample's
// normalised CHW floats to out.f32, and prints the plan:
//   sized <h> <w> / box <x> <y> <w> <h> (RandomResizedCrop only) / flip <0|1> /
//   crop <h> <w> <top> <left> <pad_bottom> <pad_right> (with crop only) / jitter <b> <c> <s>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "joint_transform.h"
#include "mask_png.h"
#include "pixel_io.h"

namespace seg = tp::segmentation_folder;

namespace {

std::vector<int> ints(const std::string& s) {
  std::vector<int> v;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    v.push_back(std::atoi(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

seg::JointOptions parse(int argc, char** argv) {
  seg::JointOptions o;
  o.format.mean = {0.5f, 0.5f, 0.5f};
  o.format.std = {0.25f, 0.25f, 0.25f};
  for (int k = 0; k < argc; ++k) {
    const std::string arg = argv[k];
    const std::size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    const std::vector<int> v = ints(value);
    if (key == "train") o.random = v[0] != 0;
    else if (key == "resize" && v.size() == 1) o.resize_short = v[0];
    else if (key == "resize") o.resize = {v[0], v[1]};
    else if (key == "random_resize") o.random_resize = {v[0], v[1]};
    else if (key == "rrc") o.random_resized_crop = {v[0], v[1]};
    else if (key == "crop") o.crop = {v[0], v[1]};
    else if (key == "hflip") o.hflip = std::atof(value.c_str());
    else if (key == "jitter") {
      std::sscanf(value.c_str(), "%lf,%lf,%lf", &o.brightness, &o.contrast, &o.saturation);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: segmentation_driver image.png mask.png seed out_image.png out_mask.png out.f32 [k=v]...\n");
    return 2;
  }
  try {
    const cv::Mat bgr = cv::imread(argv[1], cv::IMREAD_COLOR);
    const cv::Mat mask = seg::decode_mask_png(tp::datasets::read_image_file(argv[2], "driver", 0), seg::MaskPixels::kIndex, argv[2]);
    const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
    const seg::JointOptions o = parse(argc - 7, argv + 7);
    const seg::JointPlan plan = seg::plan_joint(bgr.rows, bgr.cols, o, seed);
    seg::JointImage g = seg::apply_geometry(bgr, mask, plan, o.ignore_index);
    cv::Mat image = g.bgr;
    if (g.flip_pending) cv::flip(g.bgr, image, 1);
    if (!cv::imwrite(argv[4], image) || !cv::imwrite(argv[5], g.mask)) return 2;
    const seg::JointSample s = seg::transform_pair(bgr, mask, o, seed);
    std::ofstream(argv[6], std::ios::binary)
        .write(reinterpret_cast<const char*>(s.pixels.data()), static_cast<std::streamsize>(s.pixels.size() * 4));
    std::printf("sized %d %d\n", plan.sized.h, plan.sized.w);
    if (plan.crop_first) std::printf("box %d %d %d %d\n", plan.box.x, plan.box.y, plan.box.w, plan.box.h);
    std::printf("flip %d\n", plan.flip ? 1 : 0);
    if (plan.crop.set())
      std::printf("crop %d %d %d %d %d %d\n", plan.crop.h, plan.crop.w, plan.crop_top, plan.crop_left, plan.pad_bottom,
                  plan.pad_right);
    std::printf("jitter %.17g %.17g %.17g\n", plan.jitter ? plan.factors.brightness : 1.0,
                plan.jitter ? plan.factors.contrast : 1.0, plan.jitter ? plan.factors.saturation : 1.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "segmentation_driver: %s\n", e.what());
    return 1;
  }
  return 0;
}
