#include "jpeg_crop.h"

#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <jpeglib.h>
#include <jerror.h>

// jpeg_crop_scanline and jpeg_skip_scanlines came with libjpeg-turbo 1.5; JCS_EXT_BGR with 1.1.
#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 1005000
#error "jpeg_crop.cpp needs libjpeg-turbo 1.5 or newer (Debian: libjpeg62-turbo-dev)"
#endif

namespace tp::datasets {
namespace {

/// OpenCV's limit on a decode's pixels (imgcodecs' validateInputImageSize, 4.6: 2^30 unless the
/// environment variable OPENCV_IO_MAX_IMAGE_PIXELS says otherwise). Above it, or with the variable
/// set, the whole-image decode runs so that OpenCV refuses the file as it always has.
constexpr uint64_t kOpenCvMaxPixels = uint64_t{1} << 30;

/// libjpeg's error manager: an error jumps back to the stage that armed `jump`; a warning
/// (corrupt data, an unknown JFIF version, ...) is only counted, and makes the caller fall back.
/// `data_missing` marks the warnings after which libjpeg makes pixels up: the entropy-coded data
/// stopped at a marker before the scan was complete ("premature end of data segment": a file cut
/// short with an end-of-image marker after the cut), or the bytes ran out ("premature end of JPEG
/// file").
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  int warnings;
  bool data_missing;
};

/// The bytes as libjpeg reads them: all in memory and never suspending (jpeg_skip_scanlines needs
/// that). OpenCV's source suspends at the end of the data instead; where libjpeg asks for more
/// than there is, `ran_out` is set (and a fake EOI handed over, as jpeg_mem_src does) and the
/// caller falls back to OpenCV's decode, so the two sources never have to agree on it.
struct MemorySource {
  jpeg_source_mgr pub;
  bool ran_out;
};

/// Everything one decode needs, in plain C structs: the stages below run between setjmp and a
/// possible longjmp, which must not skip a C++ destructor.
struct Decoder {
  jpeg_decompress_struct cinfo;
  ErrorManager error;
  MemorySource source;
  bool created = false;
  bool multiple_scans = false;  ///< jpeg_has_multiple_scans, read in stage 1 (progressive, non-interleaved)
};

const JOCTET kFakeEoi[2] = {0xFF, JPEG_EOI};

void error_exit(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<ErrorManager*>(cinfo->err)->jump, 1); }

void emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;  // a trace message, ignored
  auto* error = reinterpret_cast<ErrorManager*>(cinfo->err);
  ++error->warnings;
  if (cinfo->err->msg_code == JWRN_HIT_MARKER || cinfo->err->msg_code == JWRN_JPEG_EOF) error->data_missing = true;
}

void init_source(j_decompress_ptr) {}
void term_source(j_decompress_ptr) {}

boolean fill_input_buffer(j_decompress_ptr cinfo) {
  auto* source = reinterpret_cast<MemorySource*>(cinfo->src);
  source->ran_out = true;
  WARNMS(cinfo, JWRN_JPEG_EOF);
  source->pub.next_input_byte = kFakeEoi;
  source->pub.bytes_in_buffer = 2;
  return TRUE;
}

void skip_input_data(j_decompress_ptr cinfo, long num_bytes) {
  if (num_bytes <= 0) return;
  auto* source = reinterpret_cast<MemorySource*>(cinfo->src);
  if (static_cast<unsigned long>(num_bytes) > source->pub.bytes_in_buffer) {
    source->ran_out = true;  // the next read gets the fake EOI
    source->pub.next_input_byte += source->pub.bytes_in_buffer;
    source->pub.bytes_in_buffer = 0;
    return;
  }
  source->pub.next_input_byte += num_bytes;
  source->pub.bytes_in_buffer -= static_cast<std::size_t>(num_bytes);
}

/// A JPEG whose crop libjpeg decodes as it decodes the whole image: 8-bit, Huffman-coded, grey or
/// three components in YCbCr or RGB, luma sampled 1 or 2 times the chroma each way (4:4:4, 4:2:2,
/// 4:2:0, 4:4:0; libjpeg-turbo 2.1's jpeg_crop_scanline mishandles 2x4 and 4x2 with scaling,
/// fixed in 3.0, and no other layout is tested here).
bool supported_layout(const jpeg_decompress_struct& c) {
  if (c.data_precision != 8 || c.arith_code || c.CCIR601_sampling) return false;
  const jpeg_component_info* comp = c.comp_info;
  if (c.num_components == 1)
    return c.jpeg_color_space == JCS_GRAYSCALE && comp[0].h_samp_factor == 1 && comp[0].v_samp_factor == 1;
  if (c.num_components != 3 || (c.jpeg_color_space != JCS_YCbCr && c.jpeg_color_space != JCS_RGB)) return false;
  const bool luma_ok = comp[0].h_samp_factor >= 1 && comp[0].h_samp_factor <= 2 && comp[0].v_samp_factor >= 1 &&
                       comp[0].v_samp_factor <= 2;
  return luma_ok && comp[1].h_samp_factor == 1 && comp[1].v_samp_factor == 1 && comp[2].h_samp_factor == 1 &&
         comp[2].v_samp_factor == 1;
}

bool clean(const Decoder& d) { return d.error.warnings == 0 && !d.source.ran_out; }

/// Stage 1: the header, the layout check and the output size at 1/reduction, exactly as OpenCV's
/// JpegDecoder::readHeader computes it (scale_num = 1, scale_denom = reduction,
/// jpeg_calc_output_dimensions). False: leave the file to the whole-image decode.
bool read_header(Decoder* d, const unsigned char* data, std::size_t size, int reduction) {
  if (setjmp(d->error.jump) != 0) return false;
  jpeg_create_decompress(&d->cinfo);
  d->created = true;
  d->source.pub.init_source = init_source;
  d->source.pub.fill_input_buffer = fill_input_buffer;
  d->source.pub.skip_input_data = skip_input_data;
  d->source.pub.resync_to_restart = jpeg_resync_to_restart;  // OpenCV's choice too
  d->source.pub.term_source = term_source;
  d->source.pub.next_input_byte = data;
  d->source.pub.bytes_in_buffer = size;
  d->source.ran_out = false;
  d->cinfo.src = &d->source.pub;
  if (jpeg_read_header(&d->cinfo, TRUE) != JPEG_HEADER_OK || !clean(*d) || !supported_layout(d->cinfo)) return false;
  d->cinfo.scale_num = 1;
  d->cinfo.scale_denom = static_cast<unsigned int>(reduction);
  jpeg_calc_output_dimensions(&d->cinfo);
  d->multiple_scans = jpeg_has_multiple_scans(&d->cinfo) != 0;
  return clean(*d);
}

/// Stage 2: decode rows crop.y0 .. crop.y1 - 1 of the columns [*xoffset, *xoffset + *width) into
/// `rows` (one pointer per crop row, each with room for `capacity` pixels: the width grows when
/// jpeg_crop_scanline moves the start left to an iMCU boundary, by at most 15 columns here). On
/// entry *xoffset and *width are the columns asked for; on return those libjpeg decoded. The
/// output settings are OpenCV's (JpegDecoder::readData): its defaults (islow IDCT, fancy
/// upsampling, block smoothing), BGR where it asks for RGB and swaps.
bool read_rows(Decoder* d, const PixelRect* crop, JDIMENSION* xoffset, JDIMENSION* width, JDIMENSION capacity,
               JSAMPROW* rows) {
  if (setjmp(d->error.jump) != 0) return false;
  jpeg_decompress_struct* c = &d->cinfo;
  c->out_color_space = JCS_EXT_BGR;
  c->out_color_components = 3;
  if (!jpeg_start_decompress(c) || !clean(*d)) return false;
  jpeg_crop_scanline(c, xoffset, width);
  if (c->output_width > capacity) return false;
  if (crop->y0 > 0) jpeg_skip_scanlines(c, static_cast<JDIMENSION>(crop->y0));
  const auto count = static_cast<JDIMENSION>(crop->y1 - crop->y0);
  for (JDIMENSION done = 0; done < count;) {
    const JDIMENSION got = jpeg_read_scanlines(c, rows + done, count - done);
    if (got == 0) return false;
    done += got;
  }
  const bool ok = clean(*d);
  jpeg_abort_decompress(c);  // the rows below the crop are never decoded
  return ok;
}

/// The decoded columns to ask libjpeg for around the crop's [x0, x1) in a `cols`-wide decode.
/// libjpeg's fancy (interpolating) chroma upsampling treats the first and last column it decodes
/// as the image's edges, so those can differ from a whole-width decode: two columns of margin on
/// each side keep them outside the crop. Block smoothing (a progressive JPEG whose coefficients
/// are incomplete: libjpeg-turbo 2.1 estimates them from a 5x5 window of DC values) takes the
/// first decoded block column for the left edge too, which changes the first two block columns of
/// each component: there the margin is two blocks of the widest-sampled component more (32 pixels
/// for 4:2:0). At least 8 columns, so that libjpeg never falls back to box upsampling for a chroma
/// plane 2 samples wide.
void decoded_columns(const PixelRect& crop, int cols, bool multiple_scans, int max_h_samp, JDIMENSION* xoffset,
                     JDIMENSION* width) {
  const int left_margin = 2 + (multiple_scans ? 2 * DCTSIZE * max_h_samp : 0);
  int start = std::max(0, crop.x0 - left_margin);
  const int end = std::min(cols, crop.x1 + 2);
  if (end - start < 8) start = std::max(0, end - 8);
  *xoffset = static_cast<JDIMENSION>(start);
  *width = static_cast<JDIMENSION>(end - start);
}

/// Releases libjpeg's memory on every way out of decode_jpeg_crop.
struct DecoderGuard {
  Decoder* d;
  ~DecoderGuard() {
    if (d->created) jpeg_destroy_decompress(&d->cinfo);
  }
};

}  // namespace

cv::Mat decode_jpeg_crop(const std::vector<unsigned char>& bytes, int reduction, const CropChooser& choose,
                         bool* data_missing) {
  if (data_missing != nullptr) *data_missing = false;
  // cv::imdecode's JPEG decoder claims the bytes only with this signature.
  if (bytes.size() < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) return {};
  if (reduction != 1 && reduction != 2 && reduction != 4 && reduction != 8) return {};
  static const bool opencv_limit_set = std::getenv("OPENCV_IO_MAX_IMAGE_PIXELS") != nullptr;
  if (opencv_limit_set) return {};

  Decoder d{};
  d.cinfo.err = jpeg_std_error(&d.error.pub);
  d.error.pub.error_exit = error_exit;
  d.error.pub.emit_message = emit_message;
  d.error.warnings = 0;
  d.error.data_missing = false;
  const DecoderGuard guard{&d};
  // Read on every way out that returns nothing: what the stages saw before they gave up.
  const auto left_to_caller = [&]() -> cv::Mat {
    if (data_missing != nullptr) *data_missing = d.error.data_missing || d.source.ran_out;
    return {};
  };
  if (!read_header(&d, bytes.data(), bytes.size(), reduction)) return left_to_caller();
  const int cols = static_cast<int>(d.cinfo.output_width), rows = static_cast<int>(d.cinfo.output_height);
  if (cols <= 0 || rows <= 0 || static_cast<uint64_t>(cols) * static_cast<uint64_t>(rows) > kOpenCvMaxPixels) return {};

  const PixelRect crop = choose(cols, rows);
  if (crop.x0 < 0 || crop.y0 < 0 || crop.x1 > cols || crop.y1 > rows || crop.x0 >= crop.x1 || crop.y0 >= crop.y1)
    return {};
  JDIMENSION xoffset = 0, width = 0;
  decoded_columns(crop, cols, d.multiple_scans, d.cinfo.max_h_samp_factor, &xoffset, &width);
  // Rows wide enough for any start jpeg_crop_scanline may move to (an iMCU is at most 16 columns),
  // each written from its start; the crop's columns are a view into them.
  const int height = crop.y1 - crop.y0;
  cv::Mat decoded(height, std::min(cols, static_cast<int>(width) + 15), CV_8UC3);
  std::vector<JSAMPROW> pointers(static_cast<std::size_t>(height));
  for (int y = 0; y < height; ++y) pointers[static_cast<std::size_t>(y)] = decoded.ptr<JSAMPLE>(y);
  if (!read_rows(&d, &crop, &xoffset, &width, static_cast<JDIMENSION>(decoded.cols), pointers.data()))
    return left_to_caller();
  const int skip = crop.x0 - static_cast<int>(xoffset);  // >= the margin, or 0 at the image's left edge
  return decoded(cv::Rect(skip, 0, crop.x1 - crop.x0, height));
}

}  // namespace tp::datasets
