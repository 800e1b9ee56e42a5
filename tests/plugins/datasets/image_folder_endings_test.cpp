// image_folder.so's default `extensions` and the files it leaves out (data trial F2): the default
// is torchvision's IMG_EXTENSIONS, so .tif/.tiff/.ppm/.pgm files are samples as in
// torchvision's ImageFolder (they were skipped without a word, shifting every later index), and
// the files of other endings are counted by ending in one log line, in the "no image files"
// error and in the warning about a class without a training image.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

namespace {

/// The lines `lib` logged at `level` that hold `text`.
int lines_logged(const PluginLibrary& lib, int32_t level, const std::string& text) {
  int count = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    count += lib.host.log_levels[i] == level && lib.host.logs[i].find(text) != std::string::npos;
  return count;
}

}  // namespace

TEST_CASE("image_folder: the default extensions are torchvision's; .tif .tiff .ppm .pgm decode like imread") {
  const std::filesystem::path root = tp::test::fresh_fixture_dir("if_endings");
  std::filesystem::create_directories(root / "a");
  std::filesystem::create_directories(root / "b");
  // Sorted as torchvision sorts them: a/0.png, a/1.tif, a/2.TIFF, b/0.ppm, b/1.pgm, b/2.bmp.
  const std::vector<std::string> names{"a/0.png", "a/1.tif", "a/2.TIFF", "b/0.ppm", "b/1.pgm", "b/2.bmp"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    cv::Mat img = tp::test::gradient_image(10, 12, 11 * static_cast<int>(i));
    if (names[i].ends_with(".pgm")) cv::cvtColor(img, img, cv::COLOR_BGR2GRAY);  // a PGM is grey
    REQUIRE(cv::imwrite((root / names[i]).string(), img));
  }
  for (const std::string name : {"x.heic", "y.heic", "z.heic"}) std::ofstream(root / "a" / name) << "heic bytes";
  std::ofstream(root / "b" / "notes.txt") << "not an image\n";

  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, root);
  Dataset ds(lib, kId, cfg, "train");
  REQUIRE(ds.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    CAPTURE(names[i]);
    int h = 0, w = 0;
    const Sample s = ds.get(i);
    CHECK(label_of(s) == (i < 3 ? 0 : 1));
    CHECK(max_abs_diff(chw(s, &h, &w), expected_chw(cv::imread((root / names[i]).string()))) == 0.0f);
  }
  // One line for the four files left out, by ending, the most frequent first; a warning, since
  // .heic is an image format.
  CHECK(lines_logged(lib, TP_LOG_WARNING, "image_folder (train): the class folders hold 4 files (.heic: 3, .txt: 1) whose "
                                    "ending is not in `extensions`: they are not listed") == 1);
  CHECK(lines_logged(lib, TP_LOG_WARNING, "add an ending to `extensions`") == 1);
}

TEST_CASE("image_folder: files of other endings: an info line when none is an image; named in the empty-class "
          "warning and in the no-image error") {
  const std::filesystem::path root = tp::test::fresh_fixture_dir("if_unlisted");
  std::filesystem::create_directories(root / "a");
  std::filesystem::create_directories(root / "h");
  std::ofstream(root / "a" / "notes.txt") << "not an image\n";
  std::ofstream(root / "h" / "1.heic") << "heic bytes";
  std::ofstream(root / "h" / "2.HEIC") << "heic bytes";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, root);
  SUBCASE("no image at all: the error names what the class folders hold") {
    void* self = nullptr;
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("no image files under '" + root.string() + "'") != std::string::npos);
    CHECK(lib.host.last_error.find(".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp") != std::string::npos);
    CHECK(lib.host.last_error.find("the class folders hold 3 files (.heic: 2, .txt: 1): add their ending to "
                                   "`extensions` if they are images") != std::string::npos);
  }
  SUBCASE("a class of .heic files only: the warning says what its folder holds") {
    REQUIRE(cv::imwrite((root / "a" / "0.png").string(), tp::test::gradient_image(8, 8, 3)));
    Dataset ds(lib, kId, cfg, "train");
    CHECK(ds.size() == 1);
    CHECK(lines_logged(lib, TP_LOG_WARNING, "1 of 2 classes have no training image ('h': 2 files (.heic: 2) whose ending "
                                      "is not in `extensions`)") == 1);
  }
  SUBCASE("only files that are no images left out: an info line, no warning") {
    std::filesystem::remove_all(root / "h");
    REQUIRE(cv::imwrite((root / "a" / "0.png").string(), tp::test::gradient_image(8, 8, 3)));
    Dataset ds(lib, kId, cfg, "train");
    CHECK(lines_logged(lib, TP_LOG_INFO, "the class folders hold 1 file (.txt: 1) whose ending is not in `extensions`") == 1);
    CHECK(lines_logged(lib, TP_LOG_WARNING, "") == 0);
  }
}
