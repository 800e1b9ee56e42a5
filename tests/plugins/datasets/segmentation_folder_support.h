// Test support for segmentation_folder.so (segmentation_folder_test.cpp,
// segmentation_folder_masks_test.cpp): image/mask folders written at test time (palette PNGs
// written here with zlib, independently of the plugin's libpng reader), the plugin's config, and
// a sample's mask and red channel read back.
#pragma once

#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "fixtures.h"

namespace tp::test::seg {

namespace fs = std::filesystem;
using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

inline constexpr const char* kSegmentationFolderId = "org.torchhost.segmentation_folder";

inline void put_u32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xFF));
}

inline void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
}

/// An 8-bit palette PNG of `ids` (h x w); palette entry k is (k * 7 % 256, 255 - k, k * 13 % 256),
/// so no colour's grey value equals its index.
inline void write_palette_png(const fs::path& path, const std::vector<uint8_t>& ids, int h, int w) {
  std::string png("\x89PNG\r\n\x1a\n", 8), ihdr, plte, raw;
  put_u32(ihdr, static_cast<uint32_t>(w));
  put_u32(ihdr, static_cast<uint32_t>(h));
  ihdr += std::string("\x08\x03\x00\x00\x00", 5);  // 8 bits, palette, deflate, no filter method, no interlace
  for (int k = 0; k < 256; ++k) {
    plte.push_back(static_cast<char>(k * 7 % 256));
    plte.push_back(static_cast<char>(255 - k));
    plte.push_back(static_cast<char>(k * 13 % 256));
  }
  for (int y = 0; y < h; ++y) {
    raw.push_back('\0');  // filter type None
    raw.append(reinterpret_cast<const char*>(ids.data()) + static_cast<size_t>(y) * w, static_cast<size_t>(w));
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string idat(size, '\0');
  REQUIRE(compress(reinterpret_cast<Bytef*>(idat.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                   static_cast<uLong>(raw.size())) == Z_OK);
  idat.resize(size);
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "PLTE", plte);
  put_chunk(png, "IDAT", idat);
  put_chunk(png, "IEND", "");
  std::ofstream(path, std::ios::binary) << png;
}

/// Class ids of a blocky mask: class (x / 4 + y / 5) % 6, with 255 on the diagonal x == y.
inline std::vector<uint8_t> block_ids(int h, int w, int salt) {
  std::vector<uint8_t> ids(static_cast<size_t>(h) * w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) ids[static_cast<size_t>(y) * w + x] = x == y ? 255 : static_cast<uint8_t>((x / 4 + y / 5 + salt) % 6);
  return ids;
}

/// An image whose red channel encodes the class of `ids` (class * 30, 250 for 255), green a
/// gradient, blue constant: after joint integer geometry (crop, flip, pad) red / 30 is the mask.
inline cv::Mat image_for(const std::vector<uint8_t>& ids, int h, int w) {
  cv::Mat bgr(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const uint8_t id = ids[static_cast<size_t>(y) * w + x];
      bgr.at<cv::Vec3b>(y, x) = cv::Vec3b(90, static_cast<uchar>(x * 3 + y), static_cast<uchar>(id == 255 ? 250 : id * 30));
    }
  return bgr;
}

struct Pair {
  std::string stem;
  int h, w;
};

/// root/images/<stem>.png and root/masks/<stem>.png (palette), written out of order.
inline fs::path write_split(const std::string& name, const std::vector<Pair>& pairs) {
  const fs::path root = tp::test::fresh_fixture_dir(name);
  int salt = 0;
  for (const Pair& p : pairs) {
    fs::create_directories((root / "images" / p.stem).parent_path());
    fs::create_directories((root / "masks" / p.stem).parent_path());
    const std::vector<uint8_t> ids = block_ids(p.h, p.w, salt++);
    REQUIRE(cv::imwrite((root / "images" / (p.stem + ".png")).string(), image_for(ids, p.h, p.w)));
    write_palette_png(root / "masks" / (p.stem + ".png"), ids, p.h, p.w);
  }
  return root;
}

inline void configure_segmentation_folder(const PluginLibrary& lib, FakeConfig& cfg, const fs::path& root) {
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["root"] = root.string();
}

/// A mask value per pixel and the image's red channel in grey levels, read back from a sample.
struct Planes {
  std::vector<int64_t> mask;
  std::vector<int> red;
  int h = 0, w = 0;
};

inline Planes planes(const Sample& s) {
  Planes p;
  const DLTensor& image = s.tensor("image");
  const DLTensor& mask = s.tensor("mask");
  REQUIRE(image.ndim == 3);
  REQUIRE((image.dtype.code == kDLFloat && image.dtype.bits == 32));
  REQUIRE(mask.ndim == 2);
  REQUIRE((mask.dtype.code == kDLInt && mask.dtype.bits == 64));
  REQUIRE(image.shape[0] == 3);
  REQUIRE(image.shape[1] == mask.shape[0]);
  REQUIRE(image.shape[2] == mask.shape[1]);
  p.h = static_cast<int>(mask.shape[0]);
  p.w = static_cast<int>(mask.shape[1]);
  const auto m = s.values<int64_t>("mask");
  const auto px = s.values<float>("image");
  p.mask.assign(m.begin(), m.end());
  for (int i = 0; i < p.h * p.w; ++i) p.red.push_back(static_cast<int>(std::lround(px[static_cast<size_t>(i)] * 255.0f)));
  return p;
}

}  // namespace tp::test::seg
