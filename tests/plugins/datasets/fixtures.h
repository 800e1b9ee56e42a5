// Test fixtures for the dataset plugins: image folders, CSV and IDX files written at test time
// into a fresh directory under the build tree, plus a FakeConfig filled with a schema's defaults.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "support/tier_s_harness.h"
#include "support/test_paths.h"

namespace tp::test {

/// A fresh, empty directory under the build tree.
inline std::filesystem::path fresh_fixture_dir(const std::string& name) {
  const auto dir = std::filesystem::path(tp::test::build_dir()) / "test-fixtures" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// A smooth 8-bit BGR image whose pixels are a function of (y, x, salt): gradients, no edges,
/// so interpolation differences stay small.
inline cv::Mat gradient_image(int h, int w, int salt) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      m.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>((x * 200) / std::max(1, w - 1) + salt % 50),
                                        static_cast<uchar>((y * 200) / std::max(1, h - 1)),
                                        static_cast<uchar>(((x + y) * 100) / std::max(1, w + h - 2) + 60));
  return m;
}

/// An 8 x 8 PNG written to `path` with its IHDR patched to declare `width` x `height`: a
/// decompression bomb's header (the CRC no longer matches; the datasets refuse it before that).
inline void write_png_declaring(const std::filesystem::path& path, uint32_t width, uint32_t height) {
  std::vector<uchar> png;
  REQUIRE(cv::imencode(".png", gradient_image(8, 8, 1), png));
  for (int k = 0; k < 4; ++k) {
    png[16 + k] = static_cast<uchar>(width >> (24 - 8 * k));
    png[20 + k] = static_cast<uchar>(height >> (24 - 8 * k));
  }
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
}

/// Sets every key of `d`'s schema to its default, strings and arrays included (defaults parsed
/// from their TOML literals; only the literal forms our plugins use).
inline void fill_defaults(const tp_descriptor_t& d, FakeConfig& cfg) {
  for (uint32_t i = 0; i < d.key_count; ++i) {
    const tp_config_key_t& k = d.keys[i];
    if (k.default_value == nullptr) continue;
    std::string text = k.default_value;
    const auto unquote = [](std::string s) { return s.size() >= 2 && s.front() == '"' ? s.substr(1, s.size() - 2) : s; };
    const auto items = [&](const std::string& s) {
      std::vector<std::string> out;
      std::string body = s.substr(1, s.size() - 2), cur;
      for (char c : body) {
        if (c == ',') { out.push_back(cur); cur.clear(); } else if (c != ' ') cur += c;
      }
      if (!cur.empty()) out.push_back(cur);
      return out;
    };
    switch (k.type) {
      case TP_CFG_BOOL: cfg.values[k.name] = text == "true"; break;
      case TP_CFG_INT: cfg.values[k.name] = int64_t{std::stoll(text)}; break;
      case TP_CFG_FLOAT: cfg.values[k.name] = std::stod(text); break;
      case TP_CFG_STRING:
      case TP_CFG_PATH: cfg.values[k.name] = unquote(text); break;
      case TP_CFG_INT_ARRAY: {
        std::vector<int64_t> v;
        for (auto& s : items(text)) v.push_back(std::stoll(s));
        cfg.values[k.name] = v;
        break;
      }
      case TP_CFG_FLOAT_ARRAY: {
        std::vector<double> v;
        for (auto& s : items(text)) v.push_back(std::stod(s));
        cfg.values[k.name] = v;
        break;
      }
      case TP_CFG_STRING_ARRAY: {
        std::vector<std::string> v;
        for (auto& s : items(text)) v.push_back(unquote(s));
        cfg.values[k.name] = v;
        break;
      }
      default: FAIL("unhandled key type");
    }
  }
}

}  // namespace tp::test
