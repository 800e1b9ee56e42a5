// libpng's classic API reports errors by longjmp. decode_with_libpng holds no C++ object of its
// own across setjmp (the Mat and the row table it fills belong to its caller, so their state is in
// memory, not in registers longjmp would restore), and the callbacks hold none, so no destructor
// is skipped and no value is left indeterminate (C++ [csetjmp.syn]).
#include "mask_png.h"

#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "tp/cpp/guard.h"

namespace tp::segmentation_folder {
namespace {

using tp::cpp::Failure;

struct MemoryReader {
  const unsigned char* data;
  std::size_t size;
  std::size_t at;
};

struct ErrorText {
  char text[200];
};

void read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > r->size - r->at) png_error(png, "the file ends early");
  std::memcpy(out, r->data + r->at, n);
  r->at += n;
}

void on_error(png_structp png, png_const_charp message) {
  auto* e = static_cast<ErrorText*>(png_get_error_ptr(png));
  std::snprintf(e->text, sizeof e->text, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // e.g. a bad iCCP chunk: the pixels still decode

/// Why a kIndex read refuses a file, or "" when it accepts it.
const char* index_refusal(int colour_type, int bit_depth) {
  if (colour_type == PNG_COLOR_TYPE_RGB || colour_type == PNG_COLOR_TYPE_RGB_ALPHA)
    return "is an RGB PNG; set `class_colors` to map its colours to class ids, or save it as a palette or "
           "greyscale PNG of class ids";
  if (bit_depth == 16) return "is a 16-bit PNG; class ids must be 8-bit (a palette or 8-bit greyscale PNG)";
  return "";
}

/// Decodes into `out` (allocated here), using `rows` for the row table. Returns "" or the reason it
/// failed; `refusal` is set when the file is a PNG that `pixels` does not accept.
std::string decode_with_libpng(const std::vector<unsigned char>& bytes, MaskPixels pixels, cv::Mat& out,
                               std::vector<png_bytep>& rows, std::string& refusal) {
  if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0) return "not a PNG file";
  ErrorText error{};
  MemoryReader reader{bytes.data(), bytes.size(), 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &error, &on_error, &on_warning);
  if (png == nullptr) return "libpng could not start";
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return "libpng could not start";
  }
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    return error.text;
  }
  png_set_read_fn(png, &reader, &read_bytes);
  png_read_info(png, info);
  const int colour_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  const auto h = static_cast<int>(png_get_image_height(png, info));
  const auto w = static_cast<int>(png_get_image_width(png, info));
  int channels = 1;
  if (pixels == MaskPixels::kIndex) {
    refusal = index_refusal(colour_type, bit_depth);
    if (!refusal.empty()) {
      png_destroy_read_struct(&png, &info, nullptr);
      return refusal;
    }
    // Palette indices and grey values below 8 bits become one byte each, unscaled.
    if (bit_depth < 8) png_set_packing(png);
    if (colour_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_strip_alpha(png);
  } else {
    channels = 3;
    png_set_expand(png);  // palette -> RGB, low-bit grey -> 8 bits, tRNS -> alpha
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    if (colour_type == PNG_COLOR_TYPE_GRAY || colour_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<png_size_t>(w) * channels) {
    png_destroy_read_struct(&png, &info, nullptr);
    return "unexpected pixel layout";
  }
  out.create(h, w, channels == 1 ? CV_8UC1 : CV_8UC3);
  rows.resize(static_cast<std::size_t>(h));
  for (int y = 0; y < h; ++y) rows[static_cast<std::size_t>(y)] = out.ptr<png_byte>(y);
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return "";
}

uint32_t pack(int r, int g, int b) {
  return (static_cast<uint32_t>(r) << 16) | (static_cast<uint32_t>(g) << 8) | static_cast<uint32_t>(b);
}

}  // namespace

cv::Mat decode_mask_png(const std::vector<unsigned char>& bytes, MaskPixels pixels, const std::string& path) {
  cv::Mat out;
  std::vector<png_bytep> rows;
  std::string refusal;
  const std::string error = decode_with_libpng(bytes, pixels, out, rows, refusal);
  if (!refusal.empty()) throw Failure(TP_ERR_CONFIG, "segmentation_folder: mask '" + path + "' " + refusal);
  if (!error.empty())
    throw Failure(TP_ERR_IO, "segmentation_folder: cannot decode mask '" + path + "': " + error +
                                 " (masks are PNG files); fix or remove the file");
  return out;
}

ColourTable::ColourTable(const std::vector<int64_t>& rgb) {
  if (rgb.size() % 3 != 0 || rgb.size() > 3 * 256)
    throw Failure(TP_ERR_CONFIG, "segmentation_folder: class_colors needs 3 values (R, G, B) per class, at most "
                                 "256 classes; got " + std::to_string(rgb.size()) + " values");
  std::vector<std::pair<uint32_t, uint8_t>> entries;
  for (std::size_t k = 0; k < rgb.size(); k += 3) {
    for (std::size_t c = 0; c < 3; ++c)
      if (rgb[k + c] < 0 || rgb[k + c] > 255)
        throw Failure(TP_ERR_CONFIG, "segmentation_folder: class_colors values must be in [0, 255], got " +
                                         std::to_string(rgb[k + c]));
    entries.emplace_back(pack(static_cast<int>(rgb[k]), static_cast<int>(rgb[k + 1]), static_cast<int>(rgb[k + 2])),
                         static_cast<uint8_t>(k / 3));
  }
  std::sort(entries.begin(), entries.end());
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (k > 0 && entries[k].first == entries[k - 1].first)
      throw Failure(TP_ERR_CONFIG, "segmentation_folder: class_colors gives classes " +
                                       std::to_string(entries[k - 1].second) + " and " +
                                       std::to_string(entries[k].second) + " the same colour");
    colours_.push_back(entries[k].first);
    ids_.push_back(entries[k].second);
  }
}

cv::Mat ColourTable::map(const cv::Mat& rgb, const std::string& path) const {
  cv::Mat ids(rgb.rows, rgb.cols, CV_8UC1);
  // Masks are flat regions: remembering the last colour skips most searches.
  uint32_t last_colour = 0xFFFFFFFFu;
  uint8_t last_id = 0;
  for (int y = 0; y < rgb.rows; ++y) {
    const unsigned char* in = rgb.ptr<unsigned char>(y);
    unsigned char* out = ids.ptr<unsigned char>(y);
    for (int x = 0; x < rgb.cols; ++x) {
      const uint32_t colour = pack(in[3 * x], in[3 * x + 1], in[3 * x + 2]);
      if (colour != last_colour) {
        const auto it = std::lower_bound(colours_.begin(), colours_.end(), colour);
        if (it == colours_.end() || *it != colour)
          throw Failure(TP_ERR_IO, "segmentation_folder: mask '" + path + "' has the colour (" +
                                       std::to_string(in[3 * x]) + ", " + std::to_string(in[3 * x + 1]) + ", " +
                                       std::to_string(in[3 * x + 2]) + ") at pixel (x " + std::to_string(x) +
                                       ", y " + std::to_string(y) + "), which class_colors does not list");
        last_colour = colour;
        last_id = ids_[static_cast<std::size_t>(it - colours_.begin())];
      }
      out[x] = last_id;
    }
  }
  return ids;
}

}  // namespace tp::segmentation_folder
