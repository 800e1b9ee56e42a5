// PNG encoding of an RGB image in memory (libpng's simplified API, tuned for speed).
#pragma once

#include <string>
#include <vector>

namespace tp::detail {

/// Encodes `rgb` (8-bit R, G, B per pixel, rows top to bottom, no padding) as PNG file bytes.
/// Uses libpng's "fast" mode: about a third of the default's time for about twice the size,
/// which suits charts that are redrawn during training (~100 KB for 1000x600).
/// Throws tp::Error with libpng's message on failure (out of memory).
/// Thread safety: [any].
std::string encode_png_rgb(const std::vector<unsigned char>& rgb, int width_px, int height_px);

/// Encodes one-channel values (rows top to bottom, no padding) as a greyscale PNG: 8-bit when
/// `sixteen_bit` is false (`pixels` holds width x height bytes), else 16-bit (width x height
/// uint16 in host order). The values are stored as they are, so a reader gets them back exactly
/// (a class map: PIL's np.array(Image.open(f)), cv2.IMREAD_UNCHANGED). Throws tp::Error with
/// libpng's message on failure. Thread safety: [any].
std::string encode_png_gray(const void* pixels, int width_px, int height_px, bool sixteen_bit);

}  // namespace tp::detail
