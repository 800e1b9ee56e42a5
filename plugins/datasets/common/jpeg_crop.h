// The CPU path's partial JPEG decode (issue 59 part 2): only the rows and columns of a crop are
// decoded, with libjpeg-turbo's own API (jpeg_crop_scanline, jpeg_skip_scanlines), at the DCT
// scale the caller picks. Its pixels are those of OpenCV's decode of the same bytes at the same
// scale (cv::imdecode, IMREAD_COLOR or IMREAD_REDUCED_COLOR_2/4/8) cut to the same crop, bit for
// bit: the same libjpeg, the same settings (the islow IDCT, fancy upsampling, block smoothing), BGR
// straight out of libjpeg (JCS_EXT_BGR, the values of OpenCV's RGB-then-swap). Anything it is not
// sure to decode exactly as OpenCV does, it leaves to the caller's whole-image decode (decode_bgr),
// which then gives today's pixels, errors and messages.
#pragma once

#include <functional>
#include <vector>

#include <opencv2/core.hpp>

namespace tp::datasets {

/// A crop in a decode's pixels: x0, y0 inclusive, x1, y1 exclusive, non-empty and inside the decode.
struct PixelRect {
  int x0 = 0;
  int y0 = 0;
  int x1 = 0;
  int y1 = 0;
};

/// The crop to keep, chosen from the size of the decode at the requested scale (cols x rows, as
/// cv::imdecode with that scale gives it: the stored size divided by `reduction`, rounded up).
using CropChooser = std::function<PixelRect(int cols, int rows)>;

/// Decodes only the crop `choose` picks of the JPEG `bytes` at 1/`reduction` of its size (1, 2, 4
/// or 8: libjpeg's DCT scaling, scale_num / scale_denom = 1 / reduction) as 8-bit BGR: a view
/// (x1 - x0 columns, y1 - y0 rows) into a buffer a few pixels wider. Equal, bit for bit, to
/// cv::imdecode(bytes, IMREAD_COLOR or IMREAD_REDUCED_COLOR_<reduction>) followed by the same crop.
/// Returns an empty Mat, having decoded nothing it keeps, when the bytes are not a baseline or
/// progressive 8-bit JPEG in YCbCr, RGB or grey with 4:4:4, 4:2:2, 4:2:0 or 4:4:0 sampling
/// (CMYK, YCCK, arithmetic coding, 12-bit, other sampling), when libjpeg gives any warning or
/// error (corrupt data, data ending early), when the decode would be larger than OpenCV's pixel
/// limit (2^30, or whenever OPENCV_IO_MAX_IMAGE_PIXELS is set), or when `choose`'s crop is not
/// inside the decode: the caller then decodes the whole image (decode_bgr), whose pixels and
/// errors are today's. Never throws for the bytes (libjpeg's errors are caught with its error
/// manager and longjmp); `choose` may throw, before anything is decoded.
/// `data_missing` (optional) is set when it returns empty because libjpeg reached data that is not
/// there and would have made pixels up (grey): the entropy-coded data of a scan stops at a marker
/// before the scan is complete ("Corrupt JPEG data: premature end of data segment", a file cut
/// short and an end-of-image marker after the cut), or the bytes run out ("Premature end of JPEG
/// file"); decode_bgr refuses such a file. It is set only when the decode reached that point: a
/// baseline JPEG's rows below the crop are never read.
/// Cost: the Huffman decoding of the rows down to the crop's last one (the coefficients of every
/// row for a progressive JPEG, which libjpeg reads whole), the inverse DCT, upsampling and colour
/// conversion of the crop's rows and of its columns widened to whole iMCUs (8 or 16 pixels).
cv::Mat decode_jpeg_crop(const std::vector<unsigned char>& bytes, int reduction, const CropChooser& choose,
                         bool* data_missing = nullptr);

}  // namespace tp::datasets
