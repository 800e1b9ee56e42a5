// The CPU path's partial JPEG decode (plugins/datasets/common/jpeg_crop.cpp, issue 59 part 2)
// against OpenCV's whole-image decode: decode_jpeg_crop gives cv::imdecode's pixels cut to the
// crop, bit for bit, at full scale and at OpenCV's reduced scales (IMREAD_REDUCED_COLOR_2/4/8), over
// crops at every edge, odd offsets and sizes and seeded random ones, for 4:2:0, 4:2:2, 4:4:4 and
// 4:4:0 sampling, grey, progressive (complete and cut short: libjpeg's block smoothing), restart
// markers and optimised Huffman tables; what it does not take (CMYK, arithmetic coding, 4:1:1,
// corrupt or cut data, PNG) it hands back empty, and transform_image then fails or decodes as the
// whole-image path always did, with the same messages. The JPEGs are written here with libjpeg's
// own encoder (OpenCV 4.6 writes only 4:2:0).
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "image_pipeline.h"
#include "jpeg_crop.h"
#include "pixel_io.h"
#include "tp/cpp/guard.h"

namespace ds = tp::datasets;

namespace {

/// Smooth colour ramps, sharp-edged blocks and per-pixel noise: every chroma sample differs from
/// its neighbours, so a wrongly upsampled edge column shows.
cv::Mat test_image(int h, int w, uint32_t seed) {
  std::mt19937 rng(seed);
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      cv::Vec3b& px = m.at<cv::Vec3b>(y, x);
      const int block = ((x / 5) * 31 + (y / 7) * 17) % 97;
      px[0] = static_cast<uchar>((x * 255 / std::max(1, w - 1) + block + rng() % 24) % 256);
      px[1] = static_cast<uchar>((y * 255 / std::max(1, h - 1) + 2 * block + rng() % 24) % 256);
      px[2] = static_cast<uchar>(((x + y) * 3 + 5 * block + rng() % 40) % 256);
    }
  return m;
}

/// How a test JPEG is written by libjpeg's encoder.
struct Encoding {
  const char* name;
  int luma_h = 2, luma_v = 2;  ///< sampling factors of Y (chroma 1x1)
  bool grey = false;
  bool progressive = false;
  bool optimize = false;
  int restart_rows = 0;        ///< restart marker every N MCU rows (0: none)
  bool cmyk = false;
  bool arithmetic = false;
  int quality = 90;
};

struct EncodeError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

void encode_error_exit(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<EncodeError*>(cinfo->err)->jump, 1); }

/// Compresses `bgr` (CV_8UC3) with libjpeg as `e` says; fails the test case on a libjpeg error.
std::vector<unsigned char> encode(const cv::Mat& bgr, const Encoding& e) {
  jpeg_compress_struct c{};
  EncodeError err{};
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = encode_error_exit;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  std::vector<unsigned char> row(static_cast<std::size_t>(bgr.cols) * 4);
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_compress(&c);
    std::free(out);
    FAIL("libjpeg could not encode " << e.name);
    return {};
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &out, &out_size);
  c.image_width = static_cast<JDIMENSION>(bgr.cols);
  c.image_height = static_cast<JDIMENSION>(bgr.rows);
  c.input_components = e.grey ? 1 : e.cmyk ? 4 : 3;
  c.in_color_space = e.grey ? JCS_GRAYSCALE : e.cmyk ? JCS_CMYK : JCS_EXT_BGR;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, e.quality, TRUE);
  if (!e.grey && !e.cmyk) {
    c.comp_info[0].h_samp_factor = e.luma_h;
    c.comp_info[0].v_samp_factor = e.luma_v;
  }
  if (e.progressive) jpeg_simple_progression(&c);
  c.optimize_coding = e.optimize ? TRUE : FALSE;
  c.restart_in_rows = e.restart_rows;
  c.arith_code = e.arithmetic ? TRUE : FALSE;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    const unsigned char* src = bgr.ptr<unsigned char>(static_cast<int>(c.next_scanline));
    for (int x = 0; x < bgr.cols; ++x) {
      const unsigned char* p = src + 3 * static_cast<std::size_t>(x);
      unsigned char* q = row.data() + static_cast<std::size_t>(c.input_components) * x;
      if (e.grey) q[0] = static_cast<unsigned char>((p[0] + 2 * p[1] + p[2]) / 4);
      else if (e.cmyk) q[0] = p[0], q[1] = p[1], q[2] = p[2], q[3] = static_cast<unsigned char>(255 - p[1] / 2);
      else q[0] = p[0], q[1] = p[1], q[2] = p[2];
    }
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<unsigned char> bytes(out, out + out_size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return bytes;
}

/// The marker positions of a JPEG's scans (FF DA), found by walking its segments: entropy-coded
/// data stuffs every FF with 00 or a restart marker, so a scan's end is the next other marker.
std::vector<std::size_t> scan_starts(const std::vector<unsigned char>& b) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 2; i + 1 < b.size(); ++i)
    if (b[i] == 0xFF && b[i + 1] == 0xDA) starts.push_back(i);
  return starts;
}

/// cv::imdecode as the whole-image path (decode_bgr) calls it, at 1/r scale.
cv::Mat opencv_decode(const std::vector<unsigned char>& bytes, int r) {
  const int flags = r == 2 ? cv::IMREAD_REDUCED_COLOR_2
                    : r == 4 ? cv::IMREAD_REDUCED_COLOR_4
                    : r == 8 ? cv::IMREAD_REDUCED_COLOR_8
                             : cv::IMREAD_COLOR;
  return cv::imdecode(cv::_InputArray(bytes.data(), static_cast<int>(bytes.size())),
                      flags | cv::IMREAD_IGNORE_ORIENTATION);
}

/// Number of differing bytes between two CV_8UC3 images of one size.
int64_t differing(const cv::Mat& a, const cv::Mat& b) {
  int64_t n = 0;
  for (int y = 0; y < a.rows; ++y) {
    const unsigned char* p = a.ptr<unsigned char>(y);
    const unsigned char* q = b.ptr<unsigned char>(y);
    for (int x = 0; x < 3 * a.cols; ++x) n += p[x] != q[x];
  }
  return n;
}

/// Crops of a cols x rows decode: the whole, every corner and edge, 1-pixel strips, odd offsets
/// around iMCU boundaries (8, 16) and `random` seeded ones.
std::vector<ds::PixelRect> crops_of(int cols, int rows, int random, uint32_t seed) {
  std::vector<ds::PixelRect> out = {{0, 0, cols, rows}, {0, 0, 1, 1}, {cols - 1, rows - 1, cols, rows},
                                     {cols - 1, 0, cols, rows}, {0, rows - 1, cols, rows},
                                     {0, 0, cols, 1}, {0, 0, 1, rows}};
  for (int x0 : {1, 2, 7, 8, 9, 15, 16, 17, 18, 33})
    for (int w : {1, 2, 5, 23}) {
      const int y0 = std::min(x0, rows - 1);
      if (x0 + w <= cols) out.push_back({x0, y0, x0 + w, std::min(rows, y0 + w + 3)});
      if (cols - x0 - w >= 0) out.push_back({cols - x0 - w, 0, cols - x0, rows});
    }
  std::mt19937 rng(seed);
  for (int i = 0; i < random; ++i) {
    const int x0 = static_cast<int>(rng() % static_cast<uint32_t>(cols));
    const int y0 = static_cast<int>(rng() % static_cast<uint32_t>(rows));
    const int x1 = x0 + 1 + static_cast<int>(rng() % static_cast<uint32_t>(cols - x0));
    const int y1 = y0 + 1 + static_cast<int>(rng() % static_cast<uint32_t>(rows - y0));
    out.push_back({x0, y0, x1, y1});
  }
  return out;
}

/// Every crop of `bytes` at scales 1, 2, 4, 8 equals OpenCV's decode at that scale cut to it.
void check_equal_everywhere(const std::vector<unsigned char>& bytes, const std::string& what, int random = 60) {
  for (int r : {1, 2, 4, 8}) {
    const cv::Mat full = opencv_decode(bytes, r);
    REQUIRE_MESSAGE(!full.empty(), what << " at 1/" << r);
    int checked = 0;
    const auto seed = static_cast<uint32_t>(7919 * static_cast<std::size_t>(r) + bytes.size());
    for (const ds::PixelRect& crop : crops_of(full.cols, full.rows, random, seed)) {
      int seen_cols = 0, seen_rows = 0;
      const cv::Mat got = ds::decode_jpeg_crop(bytes, r, [&](int c, int rr) {
        seen_cols = c;
        seen_rows = rr;
        return crop;
      });
      INFO(what << " at 1/" << r << ", crop x " << crop.x0 << ".." << crop.x1 << " y " << crop.y0 << ".." << crop.y1);
      REQUIRE(seen_cols == full.cols);
      REQUIRE(seen_rows == full.rows);
      REQUIRE(!got.empty());
      REQUIRE(got.type() == CV_8UC3);
      REQUIRE(got.cols == crop.x1 - crop.x0);
      REQUIRE(got.rows == crop.y1 - crop.y0);
      const cv::Mat want = full(cv::Rect(crop.x0, crop.y0, crop.x1 - crop.x0, crop.y1 - crop.y0));
      CHECK(differing(got, want) == 0);
      ++checked;
    }
    CHECK(checked > random);
  }
}

ds::PixelRect whole(int cols, int rows) { return {0, 0, cols, rows}; }

/// The message transform_image throws for `bytes`, or "" when it does not throw.
std::string transform_error(const std::vector<unsigned char>& bytes, const ds::TransformOptions& o) {
  try {
    (void)ds::transform_image(bytes, "x.jpg", o, 7);
  } catch (const tp::cpp::Failure& e) {
    return e.what();
  }
  return "";
}

/// The message the whole-image decode (decode_bgr, the path before the partial decode) throws.
std::string whole_decode_error(const std::vector<unsigned char>& bytes) {
  try {
    (void)ds::decode_bgr(bytes, cv::IMREAD_COLOR, "x.jpg", "image_folder");
  } catch (const tp::cpp::Failure& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("decode_jpeg_crop: OpenCV's pixels cut to the crop, bit for bit, at every scale and sampling") {
  // Sizes that are not multiples of an iMCU (16), one that is, and thin ones.
  const std::vector<std::pair<int, int>> sizes = {{181, 237}, {96, 128}, {45, 300}, {300, 21}};
  const std::vector<Encoding> encodings = {
      {"4:2:0"},
      {"4:2:2", 2, 1},
      {"4:4:4", 1, 1},
      {"4:4:0", 1, 2},
      {"grey", 1, 1, true},
      {"4:2:0 progressive", 2, 2, false, true},
      {"4:4:4 progressive", 1, 1, false, true},
      {"grey progressive", 1, 1, true, true},
      {"4:2:0 optimised Huffman, restart every MCU row", 2, 2, false, false, true, 1},
      {"4:2:2 quality 100", 2, 1, false, false, false, 0, false, false, 100},
  };
  uint32_t seed = 1;
  for (const auto& [h, w] : sizes)
    for (const Encoding& e : encodings) {
      const std::string what = std::string(e.name) + " " + std::to_string(w) + "x" + std::to_string(h);
      check_equal_everywhere(encode(test_image(h, w, seed++), e), what, w > 100 && h > 100 ? 60 : 20);
    }
}

TEST_CASE("decode_jpeg_crop: OpenCV's own JPEGs and a progressive JPEG cut short (block smoothing)") {
  const cv::Mat img = test_image(203, 157, 99);
  std::vector<unsigned char> bytes;
  REQUIRE(cv::imencode(".jpg", img, bytes, {cv::IMWRITE_JPEG_QUALITY, 90}));
  check_equal_everywhere(bytes, "OpenCV's 4:2:0");
  REQUIRE(cv::imencode(".jpg", img, bytes, {cv::IMWRITE_JPEG_QUALITY, 75, cv::IMWRITE_JPEG_PROGRESSIVE, 1}));
  check_equal_everywhere(bytes, "OpenCV's progressive");

  // The first scans only (DC and the first AC bands), then EOI: libjpeg smooths the blocks whose
  // coefficients are missing, from their neighbours; the crop must smooth as the whole image does.
  for (const Encoding& e :
       {Encoding{"4:2:0 progressive", 2, 2, false, true}, Encoding{"4:4:4 progressive", 1, 1, false, true}}) {
    const std::vector<unsigned char> progressive = encode(img, e);
    const std::vector<std::size_t> scans = scan_starts(progressive);
    REQUIRE(scans.size() > 4);
    for (std::size_t keep : {std::size_t{1}, std::size_t{3}}) {
      std::vector<unsigned char> cut(progressive.begin(),
                                     progressive.begin() + static_cast<std::ptrdiff_t>(scans[keep]));
      cut.push_back(0xFF);
      cut.push_back(0xD9);
      check_equal_everywhere(cut, std::string(e.name) + " with " + std::to_string(keep) + " scans");
    }
  }
}

TEST_CASE("decode_jpeg_crop: what it does not take comes back empty, and the pipeline keeps today's errors") {
  const cv::Mat img = test_image(64, 80, 5);
  const auto empty = [](const std::vector<unsigned char>& bytes, int r = 1) {
    return ds::decode_jpeg_crop(bytes, r, whole).empty();
  };
  SUBCASE("layouts libjpeg decodes but this path leaves to OpenCV") {
    for (const Encoding& e : {Encoding{"CMYK", 1, 1, false, false, false, 0, true},
                              Encoding{"arithmetic", 2, 2, false, false, false, 0, false, true},
                              Encoding{"4:1:1", 4, 1}, Encoding{"4:1:0 (4x2)", 4, 2}}) {
      const std::vector<unsigned char> bytes = encode(img, e);
      CHECK_MESSAGE(empty(bytes), e.name);
      for (int r : {2, 8}) CHECK_MESSAGE(empty(bytes, r), e.name);
    }
  }
  SUBCASE("not a JPEG, a wrong scale, a crop outside the decode") {
    std::vector<unsigned char> png;
    REQUIRE(cv::imencode(".png", img, png));
    CHECK(empty(png));
    const std::vector<unsigned char> jpeg = encode(img, Encoding{"4:2:0"});
    CHECK(empty(jpeg, 3));
    CHECK(ds::decode_jpeg_crop(jpeg, 1, [](int c, int r) { return ds::PixelRect{0, 0, c + 1, r}; }).empty());
    CHECK(ds::decode_jpeg_crop(jpeg, 1, [](int c, int r) { return ds::PixelRect{3, 0, 3, r}; }).empty());
    CHECK(!empty(jpeg));
  }
  SUBCASE("cut, garbage and corrupt bytes") {
    const std::vector<unsigned char> jpeg = encode(test_image(160, 96, 3), Encoding{"4:2:0"});
    std::vector<unsigned char> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() * 6 / 10));
    CHECK(empty(cut));  // runs out of data (the pipeline refuses it before: check_image_bytes)
    std::vector<unsigned char> garbage = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00, 0x01};
    garbage.resize(400, 0x5A);
    CHECK(empty(garbage));
    // Corrupt entropy-coded data two thirds down: libjpeg warns and decodes on. A crop that reaches
    // it is left to OpenCV (which warns and shows grey); one above it is decoded, with OpenCV's pixels.
    // (A restart marker where none belongs: the Huffman decoder stops at it.)
    std::vector<unsigned char> corrupt = jpeg;
    const std::size_t data = scan_starts(jpeg).at(0) + 20;
    const std::size_t at = data + (jpeg.size() - 2 - data) * 2 / 3;
    corrupt[at] = 0xFF;
    corrupt[at + 1] = 0xD3;
    const cv::Mat reference = opencv_decode(corrupt, 1);
    REQUIRE(!reference.empty());
    CHECK(ds::decode_jpeg_crop(corrupt, 1, whole).empty());
    const cv::Mat top = ds::decode_jpeg_crop(corrupt, 1, [](int c, int) { return ds::PixelRect{5, 0, c - 3, 20}; });
    REQUIRE(!top.empty());
    CHECK(differing(top, reference(cv::Rect(5, 0, reference.cols - 8, 20))) == 0);
  }
  SUBCASE("transform_image fails with the whole-image decode's message") {
    ds::TransformOptions o;
    o.random = true;
    o.random_resized_crop = {24, 24};
    std::vector<unsigned char> header_only = encode(img, Encoding{"4:2:0"});
    // SOI + the tables and SOF, then a scan marker with a bad length and an EOI: the header parses
    // far enough for jpeg_size, libjpeg then fails on the scan header.
    const std::size_t sos = scan_starts(header_only).at(0);
    header_only.resize(sos);
    for (unsigned char b : {0xFF, 0xDA, 0x00, 0x03, 0x09, 0xFF, 0xD9}) header_only.push_back(b);
    std::vector<unsigned char> garbage = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x40, 0x00, 0x50, 0x03};
    garbage.resize(300, 0xA5);
    garbage.push_back(0xFF);
    garbage.push_back(0xD9);
    for (const auto* bytes : {&header_only, &garbage}) {
      const std::string want = whole_decode_error(*bytes);
      REQUIRE(!want.empty());
      CHECK(transform_error(*bytes, o) == want);
    }
  }
}

TEST_CASE("a JPEG cut inside its scan with an end-of-image marker appended is refused, not decoded to grey") {
  // Issue 58 (a low): check_image_bytes finds a cut JPEG by the missing end-of-image marker after
  // its last scan; with FF D9 appended after the cut, cv::imdecode printed libjpeg's "premature
  // end of data segment" and filled the rest with grey, and the sample trained without a word.
  const cv::Mat img = test_image(160, 96, 11);
  for (const Encoding& e : {Encoding{"4:2:0"}, Encoding{"4:2:0 progressive", 2, 2, false, true}}) {
    CAPTURE(e.name);
    const std::vector<unsigned char> jpeg = encode(img, e);
    const std::size_t last_scan = scan_starts(jpeg).back();
    // Cut two thirds into the last scan's data, then the marker, as a fixer of "truncated" files does.
    std::vector<unsigned char> cut(jpeg.begin(),
                                   jpeg.begin() + static_cast<std::ptrdiff_t>(last_scan + (jpeg.size() - last_scan) * 2 / 3));
    cut.push_back(0xFF);
    cut.push_back(0xD9);
    REQUIRE(!opencv_decode(cut, 1).empty());  // the old path: decoded, the rest grey
    ds::check_image_bytes(cut, "cut.jpg", "image_folder", 0);  // the byte check passes: it ends with EOI
    for (int r : {1, 2, 8}) {
      bool missing = false;
      CHECK(ds::decode_jpeg_crop(cut, r, whole, &missing).empty());
      CHECK(missing);
    }
    const std::string refused = whole_decode_error(cut);
    CHECK(refused.find("image_folder: 'x.jpg' is a truncated or corrupt JPEG") != std::string::npos);
    CHECK(refused.find("premature end of data segment") != std::string::npos);
    // The pipeline, with a crop that reaches the cut, at full and reduced scale.
    ds::TransformOptions o;
    o.resize = {160, 96};
    CHECK(transform_error(cut, o) == refused);
    o.resize = {40, 24};
    CHECK(transform_error(cut, o).find("is a truncated or corrupt JPEG") != std::string::npos);
    // The complete file, and the whole-image decode's pixels as OpenCV's.
    CHECK(transform_error(jpeg, o).empty());
    const cv::Mat reference = opencv_decode(jpeg, 1);
    CHECK(differing(ds::decode_bgr(jpeg, cv::IMREAD_COLOR, "x.jpg", "image_folder"), reference) == 0);
    if (!e.progressive) {
      // A baseline crop above the cut is the file's own pixels: decoded, nothing made up.
      bool missing = true;
      const cv::Mat top = ds::decode_jpeg_crop(cut, 1, [](int c, int) { return ds::PixelRect{0, 0, c, 16}; }, &missing);
      REQUIRE(!top.empty());
      CHECK_FALSE(missing);
      CHECK(differing(top, reference(cv::Rect(0, 0, reference.cols, 16))) == 0);
    }
  }
  // A harmless warning is no refusal: garbage before the end-of-image marker of a progressive JPEG
  // (libjpeg: "extraneous bytes before marker 0xd9", as a few ImageNet files have) decodes as OpenCV does.
  std::vector<unsigned char> extra = encode(img, Encoding{"4:2:0 progressive", 2, 2, false, true});
  extra.insert(extra.end() - 2, {0x12, 0x34, 0x56});
  const cv::Mat got = ds::decode_bgr(extra, cv::IMREAD_COLOR, "x.jpg", "image_folder");
  CHECK(differing(got, opencv_decode(extra, 1)) == 0);
}
