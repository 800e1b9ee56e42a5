// The C++ side of the resize oracle (resize_oracle.py is the other side): image_folder's pipeline
// (tp_image_transforms, load_image) on one file per request, its 8-bit pixels written out for
// PIL / torchvision to compare. Links only the transform library and OpenCV: no LibTorch.
// stdin, one request a line:
//   <in> <out.rgb> <bilinear|bicubic> <resize_h> <resize_w> <crop_h> <crop_w> <rrc_h> <rrc_w> <seed>
// resize_h > 0 with resize_w = 0 is `resize = [resize_h]` (shorter side); 0 0 leaves a key unset;
// rrc_h > 0 runs the train split's random_resized_crop (default scale and ratio) with `seed`.
// stdout, one line a request: `<h> <w> <x> <y> <bw> <bh>`: the output size and, for
// random_resized_crop, the box torchvision's resized_crop is given (else 0 0 0 0). out.rgb: h * w
// * 3 bytes, RGB, row-major: the pipeline's floats (mean 0, std 1) times 255, which are whole.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "image_pipeline.h"
#include "pixel_io.h"
#include "rng.h"

namespace ds = tp::datasets;

namespace {

int run_one(const std::string& in, const std::string& out, const std::string& interpolation, int resize_h,
            int resize_w, int crop_h, int crop_w, int rrc_h, int rrc_w, uint64_t seed) {
  ds::TransformOptions o;
  o.interpolation = interpolation == "bicubic" ? ds::Interpolation::kBicubic : ds::Interpolation::kBilinear;
  if (resize_h > 0 && resize_w == 0) o.resize_short = resize_h;
  if (resize_h > 0 && resize_w > 0) o.resize = {resize_h, resize_w};
  if (crop_h > 0) o.center_crop = {crop_h, crop_w};
  ds::CropBox box;
  if (rrc_h > 0) {
    o.random = true;
    o.random_resized_crop = {rrc_h, rrc_w};
    // The pipeline draws the same box from the same stream (image_pipeline.cpp, draw_plan).
    const cv::Mat header = cv::imread(in, cv::IMREAD_COLOR);
    if (header.empty()) return std::fprintf(stderr, "cannot read %s\n", in.c_str()), 2;
    ds::Rng rng(seed, ds::kTagCrop);
    box = ds::random_resized_crop_box(header.rows, header.cols, o.scale, o.ratio, rng);
  }
  const ds::Image img = ds::load_image(in, o, seed);
  std::vector<unsigned char> rgb(static_cast<std::size_t>(img.h) * img.w * 3);
  const std::size_t plane = static_cast<std::size_t>(img.h) * img.w;
  for (std::size_t i = 0; i < plane; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      rgb[3 * i + c] = static_cast<unsigned char>(std::lround(img.pixels[c * plane + i] * 255.0f));
  std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(rgb.data()),
                                             static_cast<std::streamsize>(rgb.size()));
  std::printf("%d %d %d %d %d %d\n", img.h, img.w, box.x, box.y, box.w, box.h);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main() {
  std::string in, out, interpolation;
  int resize_h = 0, resize_w = 0, crop_h = 0, crop_w = 0, rrc_h = 0, rrc_w = 0;
  uint64_t seed = 0;
  while (std::cin >> in >> out >> interpolation >> resize_h >> resize_w >> crop_h >> crop_w >> rrc_h >> rrc_w >> seed) {
    try {
      if (const int rc = run_one(in, out, interpolation, resize_h, resize_w, crop_h, crop_w, rrc_h, rrc_w, seed); rc != 0)
        return rc;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", in.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
