// image_folder.so on files that are not images it can use (docs/hardening.md, sections 14 and 15):
// a file that does not decode, a truncated JPEG, a FIFO, a JPEG cut inside its scan with an
// end-of-image marker appended, a file past the 1 GiB read limit, a header declaring more than
// max_image_pixels. Each fails its sample naming the file (what data.on_bad_sample acts on), or
// the split, and nothing hangs, decodes half a file or allocates the claimed size.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

TEST_CASE("image_folder: a file that does not decode fails the sample, naming the file") {
  const Fixture f = write_folder("if_broken", 8, 8);
  std::ofstream(f.root / "cat" / "img_9.jpg") << "this is not a jpeg";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  Dataset ds(lib, kId, cfg, "train");
  REQUIRE(ds.size() == 10);
  Sample s;
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
  CHECK(ds.try_get(6, &ctx, s) == TP_ERR_IO);  // cat: img_0, img_1, img_2 (png), img_9.jpg
  CHECK(lib.host.last_error.find("img_9.jpg") != std::string::npos);
  CHECK(s.fields().empty());
  CHECK(ds.try_get(5, &ctx, s) == TP_OK);  // the others still load
}

TEST_CASE("image_folder: an empty file fails its sample saying so, without OpenCV's assertion text") {
  const Fixture f = write_folder("if_empty", 8, 8);
  std::ofstream(f.root / "cat" / "img_9.jpg").close();
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  for (const bool fast : {true, false}) {
    CAPTURE(fast);
    cfg.values["fast_decode"] = fast;
    Dataset ds(lib, kId, cfg, "train");
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
    CHECK(ds.try_get(6, &ctx, s) == TP_ERR_IO);
    INFO(lib.host.last_error);
    CHECK(lib.host.last_error.find("img_9.jpg' is empty (0 bytes), not an image") != std::string::npos);
    CHECK(lib.host.last_error.find("Assertion") == std::string::npos);
  }
}

TEST_CASE("image_folder: a truncated JPEG and a FIFO fail their sample; nothing hangs or decodes half a file") {
  // Before (issue 41): a JPEG cut to 90% decoded with grey rows and no error (PIL refuses it), and
  // a FIFO named by a listing blocked the loader forever in open(). A folder scan lists regular
  // files only, so the FIFO comes through a csv listing, as through a COCO file_name.
  const Fixture f = write_folder("if_truncated", 8, 8);
  const std::filesystem::path whole = f.root / "cat" / "whole.jpg";
  REQUIRE(cv::imwrite(whole.string(), tp::test::gradient_image(64, 64, 3), {cv::IMWRITE_JPEG_QUALITY, 90}));
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(f.root / "cat" / "cut.jpg", std::ios::binary) << bytes.substr(0, bytes.size() * 9 / 10);
  REQUIRE(::mkfifo((f.root / "cat" / "fifo.png").c_str(), 0600) == 0);
  std::ofstream(f.root / "list.csv") << "cat/whole.jpg,0\ncat/cut.jpg,0\ncat/fifo.png,0\n";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["csv"] = (f.root / "list.csv").string();
  for (const bool fast : {true, false}) {
    CAPTURE(fast);
    cfg.values["fast_decode"] = fast;
    Dataset ds(lib, kId, cfg, "train");
    REQUIRE(ds.size() == 3);
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
    CHECK(ds.try_get(0, &ctx, s) == TP_OK); // the whole JPEG
    CHECK(ds.try_get(1, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("cut.jpg' is a truncated JPEG") != std::string::npos);
    CHECK(ds.try_get(2, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("fifo.png' is a FIFO, not a regular file") != std::string::npos);
  }
}

TEST_CASE("image_folder: a JPEG cut inside its scan with an end-of-image marker appended fails its sample") {
  // Issue 58 (a low): the byte check finds a cut JPEG by its missing end-of-image marker; with FF D9
  // appended after the cut, OpenCV decoded the rest as grey and the sample trained silently.
  const Fixture f = write_folder("if_cut_eoi", 8, 8);
  std::vector<uchar> jpeg;
  REQUIRE(cv::imencode(".jpg", tp::test::gradient_image(96, 64, 3), jpeg, {cv::IMWRITE_JPEG_QUALITY, 95}));
  jpeg.resize(jpeg.size() * 7 / 10);  // well inside the scan (the headers take ~600 bytes)
  jpeg.push_back(0xFF);
  jpeg.push_back(0xD9);
  std::ofstream(f.root / "cat" / "cut_eoi.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
  REQUIRE(!cv::imread((f.root / "cat" / "cut_eoi.jpg").string()).empty());  // what OpenCV made of it
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  for (const bool fast : {true, false}) {
    CAPTURE(fast);
    cfg.values["fast_decode"] = fast;
    cfg.values["resize"] = std::vector<int64_t>{24, 16};  // 1/4 scale with fast_decode
    Dataset ds(lib, kId, cfg, "train");
    REQUIRE(ds.size() == 10);
    Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
    CHECK(ds.try_get(3, &ctx, s) == TP_ERR_IO);  // cat: cut_eoi.jpg, img_0, img_1, img_2
    CHECK(lib.host.last_error.find("cut_eoi.jpg' is a truncated or corrupt JPEG") != std::string::npos);
    CHECK(ds.try_get(4, &ctx, s) == TP_OK);
  }
}

TEST_CASE("image_folder: a file larger than 1 GiB is refused before it is read or allocated") {
  // Issue 58 (a low): the plugins did not pass read_image_file's byte cap, so a sparse 64 GB file in
  // a listing cost its size in memory (and its read). Sparse: no disk is used.
  const Fixture f = write_folder("if_sparse", 8, 8);
  const std::filesystem::path huge = f.root / "cat" / "huge.png";
  std::ofstream(huge) << "";
  REQUIRE(::truncate(huge.c_str(), off_t{64} << 30) == 0);
  const std::filesystem::path over = f.root / "cat" / "over.png";
  std::ofstream(over) << "";
  REQUIRE(::truncate(over.c_str(), (off_t{1} << 30) + 1) == 0);
  std::ofstream(f.root / "list.csv") << "cat/huge.png,0\ncat/over.png,0\ncat/img_0.png,0\n";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["csv"] = (f.root / "list.csv").string();
  Dataset ds(lib, kId, cfg, "train");
  Sample s;
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
  const auto start = std::chrono::steady_clock::now();
  CHECK(ds.try_get(0, &ctx, s) == TP_ERR_IO);
  CHECK(lib.host.last_error.find("huge.png' holds 68719476736 bytes, more than the 1073741824") != std::string::npos);
  CHECK(ds.try_get(1, &ctx, s) == TP_ERR_IO);
  CHECK(lib.host.last_error.find("over.png' holds 1073741825 bytes") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));  // nothing was read
  CHECK(ds.try_get(2, &ctx, s) == TP_OK);
  std::filesystem::remove(huge);  // no disk, but a copy of the test directory would read 64 GiB
  std::filesystem::remove(over);
}

TEST_CASE("image_folder: max_image_pixels refuses a file by its header, before any decode, in every format") {
  // Before (issue 41): an 875 KB PNG declaring 30000 x 30000 was decoded to 2.7 GB. The limit is
  // PIL's decompression-bomb limit, read from the header of each format the decoder takes.
  const Fixture f = write_folder("if_bomb", 8, 8);
  const cv::Mat img = tp::test::gradient_image(48, 64, 3);  // 64 wide, 48 tall: 3,072 pixels
  // WebP three ways: lossless (VP8L, OpenCV's default), lossy (VP8), and extended (VP8X before the
  // VP8L chunk: the canvas size, 24-bit width - 1 and height - 1).
  // Netpbm and TIFF too (security trial F15: their bombs were "truncated or damaged").
  const std::vector<std::string> formats = {"sized.jpg",     "sized.png", "sized.bmp", "sized.webp", "lossy.webp",
                                            "extended.webp", "sized.ppm", "sized.tiff"};
  for (const char* name : {"sized.jpg", "sized.png", "sized.bmp", "sized.webp", "sized.ppm", "sized.tiff"})
    REQUIRE(cv::imwrite((f.root / "cat" / name).string(), img));
  REQUIRE(cv::imwrite((f.root / "cat" / "lossy.webp").string(), img, {cv::IMWRITE_WEBP_QUALITY, 90}));
  {
    std::vector<uchar> webp;
    REQUIRE(cv::imencode(".webp", img, webp));
    const std::vector<uchar> vp8x = {'V', 'P', '8', 'X', 10, 0, 0, 0, 0, 0, 0, 0, 63, 0, 0, 47, 0, 0};
    webp.insert(webp.begin() + 12, vp8x.begin(), vp8x.end());
    const auto riff = static_cast<uint32_t>(webp.size() - 8);
    for (int k = 0; k < 4; ++k) webp[4 + k] = static_cast<uchar>(riff >> (8 * k));
    std::ofstream(f.root / "cat" / "extended.webp", std::ios::binary)
        .write(reinterpret_cast<const char*>(webp.data()), static_cast<std::streamsize>(webp.size()));
  }
  std::string listing;
  for (const std::string& name : formats) listing += "cat/" + name + ",0\n";
  tp::test::write_png_declaring(f.root / "cat" / "bomb.png", 30000, 30000);
  // Two 32-bit fields whose product overflows int64.
  tp::test::write_png_declaring(f.root / "cat" / "huge.png", 0xFFFFFFFFu, 0xFFFFFFFFu);
  // Headers alone declaring 60000 x 60000: a netpbm file and a little-endian TIFF whose one
  // directory holds ImageWidth (SHORT) and ImageLength (LONG).
  std::ofstream(f.root / "cat" / "bomb.ppm", std::ios::binary) << "P6\n# a comment\n60000 60000\n255\n" << std::string(64, 'x');
  {
    const unsigned char tiff[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 2, 0,                     // header, 2 entries
                                  0x00, 0x01, 3, 0, 1, 0, 0, 0, 0x60, 0xEA, 0, 0,          // ImageWidth SHORT 60000
                                  0x01, 0x01, 4, 0, 1, 0, 0, 0, 0x60, 0xEA, 0, 0, 0, 0, 0, 0};  // ImageLength LONG 60000
    std::ofstream(f.root / "cat" / "bomb.tif", std::ios::binary).write(reinterpret_cast<const char*>(tiff), sizeof tiff);
  }
  std::ofstream(f.root / "list.csv") << listing << "cat/bomb.png,0\ncat/huge.png,0\ncat/bomb.ppm,0\ncat/bomb.tif,0\n";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["csv"] = (f.root / "list.csv").string();
  cfg.values["resize"] = std::vector<int64_t>{8, 8};
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
  Sample s;
  {
    Dataset ds(lib, kId, cfg, "train");  // the default: 178,956,970
    for (uint64_t i = 0; i < formats.size(); ++i) CHECK(ds.try_get(i, &ctx, s) == TP_OK);
    const uint64_t bombs = formats.size();
    CHECK(ds.try_get(bombs, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("bomb.png' declares 30000 x 30000 = 900000000 pixels, more than "
                                   "max_image_pixels = 178956970") != std::string::npos);
    CHECK(lib.host.last_error.find("raise max_image_pixels (0: no limit)") != std::string::npos);
    CHECK(ds.try_get(bombs + 1, &ctx, s) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("declares 4294967295 x 4294967295 = 18446744065119617025 pixels") !=
          std::string::npos);
    for (const uint64_t i : {bombs + 2, bombs + 3}) {
      CHECK(ds.try_get(i, &ctx, s) == TP_ERR_IO);
      CHECK(lib.host.last_error.find("' declares 60000 x 60000 = 3600000000 pixels, more than max_image_pixels") !=
            std::string::npos);
    }
  }
  for (const bool fast : {true, false}) {
    CAPTURE(fast);
    cfg.values["fast_decode"] = fast;
    cfg.values["max_image_pixels"] = int64_t{64 * 48};  // exactly the images' size: allowed
    Dataset at_limit(lib, kId, cfg, "train");
    for (uint64_t i = 0; i < formats.size(); ++i) CHECK(at_limit.try_get(i, &ctx, s) == TP_OK);
    cfg.values["max_image_pixels"] = int64_t{64 * 48 - 1};
    Dataset below(lib, kId, cfg, "train");
    for (uint64_t i = 0; i < formats.size(); ++i) {
      CAPTURE(formats[i]);
      CHECK(below.try_get(i, &ctx, s) == TP_ERR_IO);
      CHECK(lib.host.last_error.find(formats[i] + "' declares 64 x 48 = 3072 pixels, more than "
                                     "max_image_pixels = 3071") != std::string::npos);
    }
  }
  cfg.values["max_image_pixels"] = int64_t{-1};
  void* self = nullptr;
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("max_image_pixels") != std::string::npos);
}

// Data trial F5: a dataset copied from a Mac holds a `._name.jpg` AppleDouble file beside every
// image; "not an image OpenCV's decoder reads" sent users looking for a damaged photo.
TEST_CASE("image_folder: a macOS AppleDouble ._ file fails its sample naming it as such and what to do") {
  const Fixture f = write_folder("if_apple_double", 8, 8);
  const std::string header("\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ", 24);
  std::ofstream(f.root / "cat" / "._img_0.png", std::ios::binary) << header;
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  Dataset ds(lib, kId, cfg, "train");
  REQUIRE(ds.size() == 10);
  Sample s;
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
  CHECK(ds.try_get(3, &ctx, s) == TP_ERR_IO);  // bird's 3, then cat's ._img_0.png ('.' sorts first)
  INFO(lib.host.last_error);
  CHECK(lib.host.last_error.find("._img_0.png': it is a macOS AppleDouble file (its first bytes are 00 05 16 07)") !=
        std::string::npos);
  CHECK(lib.host.last_error.find("remove the ._* files") != std::string::npos);
}

/// What the calls in `body` wrote to file descriptor 2 (OpenCV and libpng print there directly).
template <typename Body>
static std::string stderr_of(Body body) {
  const std::filesystem::path file = std::filesystem::path(tp::test::build_dir()) / "test-fixtures" / "stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int sink = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0);
  REQUIRE(sink >= 0);
  ::dup2(sink, 2);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(sink);
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Data trial F8: cut PNG, WebP, BMP and TIFF files were refused as "not an image OpenCV's decoder
// reads" although each is one, and libpng and OpenCV printed unattributed lines on stderr
// ("libpng error: PNG input buffer is incomplete", "imdecode_(''): can't read data: ...").
TEST_CASE("image_folder: a PNG, BMP, WebP, TIFF or PPM cut short is named as such a file that does not decode") {
  const Fixture f = write_folder("if_cut_formats", 8, 8);
  const cv::Mat image = tp::test::gradient_image(40, 56, 7);
  std::vector<std::string> names;
  for (const std::string ext : {".png", ".bmp", ".webp", ".tiff", ".ppm"}) {
    std::vector<uchar> bytes;
    REQUIRE(cv::imencode(ext, image, bytes));
    bytes.resize(bytes.size() * 6 / 10);
    const std::string name = "cut" + ext;
    std::ofstream(f.root / "cat" / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    names.push_back(name);
  }
  std::vector<uchar> png;
  REQUIRE(cv::imencode(".png", image, png));
  png.resize(png.size() - 12);  // without its IEND chunk: refused, as OpenCV refuses it (PIL reads it)
  std::ofstream(f.root / "cat" / "noiend.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  std::ofstream list(f.root / "list.csv");
  for (const std::string& name : names) list << "cat/" << name << ",0\n";
  list << "cat/noiend.png,0\ncat/img_0.png,0\n";
  list.close();
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["csv"] = (f.root / "list.csv").string();
  cfg.values["extensions"] = std::vector<std::string>{".png", ".bmp", ".webp", ".tiff", ".ppm"};
  Dataset ds(lib, kId, cfg, "train");
  REQUIRE(ds.size() == 7);
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
  const std::vector<std::string> want = {
      "cut.png' is a PNG file that does not decode (truncated or damaged: its IDAT chunk is cut short; "
      "re-download or re-export it",
      "cut.bmp' is a BMP file that does not decode (truncated or damaged: it holds ",
      "cut.webp' is a WebP file that does not decode (truncated or damaged; re-download or re-export it",
      "cut.tiff' is a TIFF file that does not decode (truncated or damaged",
      "cut.ppm' is a netpbm (PPM/PGM) file that does not decode (truncated or damaged",
      "noiend.png' is a PNG file that does not decode (truncated or damaged: it ends without its IEND chunk"};
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    Sample s;
    // The PNG and BMP are refused before the decoder runs, so nothing goes to stderr.
    const std::string printed = stderr_of([&] { CHECK(ds.try_get(i, &ctx, s) == TP_ERR_IO); });
    CHECK_MESSAGE(lib.host.last_error.find(want[i]) != std::string::npos, lib.host.last_error);
    CHECK(lib.host.last_error.find("not an image") == std::string::npos);
    if (i == 0 || i == 1 || i == 5) CHECK_MESSAGE(printed.empty(), printed);
  }
  Sample s;
  CHECK(ds.try_get(6, &ctx, s) == TP_OK);
}
