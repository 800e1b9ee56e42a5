#include "png_encode.h"

#include <png.h>

#include <cstring>

#include "tp/framework/error.h"

namespace tp::detail {

std::string encode_png_rgb(const std::vector<unsigned char>& rgb, int width_px, int height_px) {
  TP_CHECK(width_px > 0 && height_px > 0 &&
               rgb.size() == static_cast<std::size_t>(width_px) * static_cast<std::size_t>(height_px) * 3,
           "encode_png_rgb: ", rgb.size(), " bytes is not a ", width_px, "x", height_px, " RGB image");
  // The simplified API reports errors in image.message instead of longjmp, so no C++ frame is
  // ever skipped, and it never prints.
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width_px);
  image.height = static_cast<png_uint_32>(height_px);
  image.format = PNG_FORMAT_RGB;
  image.flags = PNG_IMAGE_FLAG_FAST;
  // Sized for the worst case up front: asking libpng for the exact size would encode twice.
  std::string png(PNG_IMAGE_PNG_SIZE_MAX(image), '\0');
  png_alloc_size_t size = png.size();
  if (png_image_write_to_memory(&image, png.data(), &size, /*convert_to_8bit=*/0, rgb.data(), /*row_stride=*/0,
                                /*colormap=*/nullptr) == 0) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error("cannot encode a plot as PNG: libpng: " + why + ".");
  }
  png.resize(size);
  png.shrink_to_fit();
  return png;
}

std::string encode_png_gray(const void* pixels, int width_px, int height_px, bool sixteen_bit) {
  TP_CHECK(pixels != nullptr && width_px > 0 && height_px > 0, "encode_png_gray: an empty ", width_px, "x",
           height_px, " image");
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width_px);
  image.height = static_cast<png_uint_32>(height_px);
  // LINEAR_Y is libpng's 16-bit greyscale; written with convert_to_8bit = 0 its values are kept.
  image.format = sixteen_bit ? PNG_FORMAT_LINEAR_Y : PNG_FORMAT_GRAY;
  image.flags = PNG_IMAGE_FLAG_FAST;
  std::string png(PNG_IMAGE_PNG_SIZE_MAX(image), '\0');
  png_alloc_size_t size = png.size();
  if (png_image_write_to_memory(&image, png.data(), &size, /*convert_to_8bit=*/0, pixels, /*row_stride=*/0,
                                /*colormap=*/nullptr) == 0) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error("cannot encode a mask as PNG: libpng: " + why + ".");
  }
  png.resize(size);
  png.shrink_to_fit();
  return png;
}

}  // namespace tp::detail
