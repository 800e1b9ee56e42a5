// image_folder.so's `csv` listing read as CSV (data trial F6): each row was split at its last
// comma, so pandas' quoted paths kept their quotes, Excel's byte-order mark made "label" a class,
// a `filename,class` header and an extra column shifted every class id, and a missing file or a
// path listed with two labels went unnoticed until (or through) training.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

namespace {

/// root/img/{a.jpg... as PNG bytes}: the files the lists name, written once per test case.
std::filesystem::path write_images(const std::string& name, const std::vector<std::string>& files) {
  const std::filesystem::path root = tp::test::fresh_fixture_dir(name);
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::filesystem::create_directories((root / "img" / files[i]).parent_path());
    std::vector<unsigned char> bytes;
    REQUIRE(cv::imencode(".png", tp::test::gradient_image(6, 6, static_cast<int>(i)), bytes));
    std::ofstream(root / "img" / files[i], std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                                  static_cast<std::streamsize>(bytes.size()));
  }
  return root;
}

/// The lines `lib` logged at `level` that hold `text`.
int csv_lines_logged(const PluginLibrary& lib, int32_t level, const std::string& text) {
  int count = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    count += lib.host.log_levels[i] == level && lib.host.logs[i].find(text) != std::string::npos;
  return count;
}

/// create() of the train split over `text` as the csv must fail with `code`, its message holding `says`.
void refused(const std::filesystem::path& root, const std::string& text, tp_status code, const std::string& says) {
  std::ofstream(root / "list.csv", std::ios::binary | std::ios::trunc) << text;
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, root / "img");
  cfg.values["csv"] = (root / "list.csv").string();
  void* self = nullptr;
  CAPTURE(text);
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == code);
  CHECK_MESSAGE(lib.host.last_error.find(says) != std::string::npos, lib.host.last_error);
}

}  // namespace

TEST_CASE("image_folder csv: quotes, a byte-order mark with CRLF, and the common headers read as CSV") {
  const std::filesystem::path root = write_images("if_csv_parse", {"a.jpg", "e,f.jpg", "g\"h.jpg", "b.jpg"});
  struct Case {
    std::string name, text;
  };
  // Each lists a.jpg (cat), e,f.jpg (dog), g"h.jpg (cat), b.jpg (dog).
  for (const Case& c : {Case{"pandas' quoting, no header", "a.jpg,cat\n\"e,f.jpg\",dog\n\"g\"\"h.jpg\",cat\nb.jpg,dog\n"},
                        Case{"Excel: BOM, CRLF, header", "\xEF\xBB\xBFpath,label\r\na.jpg,cat\r\n\"e,f.jpg\",dog\r\n"
                                                         "\"g\"\"h.jpg\",cat\r\nb.jpg,dog\r\n"},
                        Case{"filename,class", "filename,class\na.jpg,cat\n\"e,f.jpg\",dog\n\"g\"\"h.jpg\",cat\nb.jpg,dog\n"},
                        Case{"Image,Label with spaces", " Image , Label \na.jpg , cat\n \"e,f.jpg\" ,dog\n"
                                                        "\"g\"\"h.jpg\",cat\nb.jpg,dog\n"},
                        Case{"label,path: the header orders the columns",
                             "class,file\ncat,a.jpg\ndog,\"e,f.jpg\"\ncat,\"g\"\"h.jpg\"\ndog,b.jpg\n"}}) {
    CAPTURE(c.name);
    std::ofstream(root / "list.csv", std::ios::binary | std::ios::trunc) << c.text;
    PluginLibrary lib("image_folder");
    FakeConfig cfg;
    configure(lib, cfg, root / "img");
    cfg.values["csv"] = (root / "list.csv").string();
    Dataset ds(lib, kId, cfg, "train");
    REQUIRE(ds.size() == 4);
    CHECK(ds.class_names() == std::vector<std::string>{"cat", "dog"});  // no "label", "class" or "path" class
    const std::vector<int64_t> labels{0, 1, 0, 1};
    for (uint64_t i = 0; i < 4; ++i) CHECK(label_of(ds.get(i)) == labels[i]);
    CHECK(csv_lines_logged(lib, TP_LOG_WARNING, "") == 0);
  }
}

TEST_CASE("image_folder csv: rows of another number of fields, conflicting duplicates and missing files are refused") {
  const std::filesystem::path root = write_images("if_csv_refused", {"a.jpg", "b.jpg", "c.jpg"});
  refused(root, "path,label,split\na.jpg,cat,train\n", TP_ERR_CONFIG,
          "list.csv:1: 3 fields ('path', 'label', 'split'), expected 2: path,label. Quote a path that holds a comma");
  refused(root, "a.jpg,cat\ne,f.jpg,dog\n", TP_ERR_CONFIG, "list.csv:2: 3 fields ('e', 'f.jpg', 'dog'), expected 2");
  refused(root, "a.jpg,cat\nb.jpg\n", TP_ERR_CONFIG, "list.csv:2: 1 field ('b.jpg'), expected 2");
  refused(root, "a.jpg,cat\n\"b.jpg,dog\nc.jpg,cat\n", TP_ERR_CONFIG,
          "list.csv:2: a quoted cell opens here and is never closed");
  refused(root, "a.jpg,cat\nb.jpg,dog\n./a.jpg,dog\n", TP_ERR_CONFIG,
          "list.csv:3: '" + (root / "img" / "./a.jpg").string() + "' is listed with label 'dog', and on line 1 with "
          "label 'cat': a file has one label");
  // Missing files: at create, how many and the first five with their lines, not mid-epoch.
  std::string rows = "a.jpg,cat\n";
  for (int i = 0; i < 7; ++i) rows += "gone" + std::to_string(i) + ".jpg,dog\n";
  refused(root, rows, TP_ERR_IO, "image_folder: 7 of 8 files listed in '" + (root / "list.csv").string() +
                                     "' do not exist (relative paths start from '" + (root / "img").string() +
                                     "'), the first 5:\n  line 2: '" + (root / "img" / "gone0.jpg").string() +
                                     "' (No such file or directory)");
  refused(root, rows, TP_ERR_IO, "line 6: '" + (root / "img" / "gone4.jpg").string());
  // A first row that is an unknown header is a missing file, and the message says what a header is.
  refused(root, "image_id,species\na.jpg,cat\n", TP_ERR_IO,
          "If the first row is a header, name its columns path,label (accepted: path/file/filename");
}

TEST_CASE("image_folder csv: Windows paths with '\\' are refused as missing, saying the separator is the cause") {
  // Data trial F7: a listing pandas wrote on Windows (`sub\a.jpg`) was 819 missing files, no hint.
  const std::filesystem::path root = write_images("if_csv_backslash", {"sub/a.jpg", "sub/b.jpg", "c.jpg"});
  refused(root, "path,label\nsub\\a.jpg,cat\nsub\\b.jpg,dog\n", TP_ERR_IO,
          "Every one holds '\\', the Windows path separator (pandas' to_csv on Windows writes paths so): on this "
          "system '\\' is part of a file name, not a separator (with '/' in its place, 2 of the first 2 exist). "
          "Rewrite the paths with '/'");
  refused(root, "path,label\nsub\\a.jpg,cat\nc.jpg,dog\ngone.jpg,dog\n", TP_ERR_IO, "1 of them holds '\\'");
  // Missing files without a '\' get no such note.
  std::ofstream(root / "list.csv", std::ios::trunc) << "path,label\ngone.jpg,dog\nc.jpg,cat\n";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, root / "img");
  cfg.values["csv"] = (root / "list.csv").string();
  void* self = nullptr;
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_IO);
  CHECK(lib.host.last_error.find("Windows") == std::string::npos);
}

TEST_CASE("image_folder csv: a path listed twice with one label, and classes apart only by case, are warned of") {
  const std::filesystem::path root = write_images("if_csv_warned", {"a.jpg", "b.jpg", "c.jpg"});
  std::ofstream(root / "list.csv") << "a.jpg,cat\nb.jpg,Cat\nc.jpg,dog\na.jpg,cat\nc.jpg,dog\n";
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, root / "img");
  cfg.values["csv"] = (root / "list.csv").string();
  Dataset ds(lib, kId, cfg, "train");
  CHECK(ds.size() == 5);  // a repeated row stays a sample
  CHECK(csv_lines_logged(lib, TP_LOG_WARNING, "lists 2 paths again with the same label ('" +
                                                  (root / "img" / "a.jpg").string() + "' on lines 1 and 4)") == 1);
  CHECK(csv_lines_logged(lib, TP_LOG_WARNING, "names the classes 'Cat' and 'cat', which differ only by case") == 1);
}

TEST_CASE("image_folder csv: a label that is not UTF-8 text is refused naming its line (data trial F7)") {
  const std::filesystem::path root = write_images("if_csv_latin1", {"a.jpg", "b.jpg"});
  refused(root, "a.jpg,cat\nb.jpg,caf\xe9\n", TP_ERR_CONFIG,
          "list.csv:2: the label 'caf\\xe9' is not valid UTF-8 (byte 3), and a class name must be UTF-8 text");
}
