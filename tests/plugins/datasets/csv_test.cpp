// csv.so through its C ABI on CSV files written at test time: column selection by name, the
// two tasks, headerless files, quoted cells, val splits and the errors for bad cells.
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fixtures.h"

namespace {

using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;

constexpr const char* kCsvId = "org.torchhost.csv";

void configure_csv(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& path) {
  REQUIRE(lib.entry().descriptor_count() == 1);
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["path"] = path.string();
}

std::filesystem::path write(const std::string& name, const std::string& text) {
  const auto path = tp::test::fresh_fixture_dir("csv_" + name) / (name + ".csv");
  std::ofstream(path) << text;
  return path;
}

tp_status create_status(PluginLibrary& lib, FakeConfig& cfg, const char* split = "train") {
  void* self = nullptr;
  const tp_status s = lib.dataset_table(kCsvId).create(&lib.host.host, &cfg.view, split, &self);
  lib.dataset_table(kCsvId).destroy(self);
  return s;
}

}  // namespace

TEST_CASE("csv: classification with columns chosen by name") {
  const auto path = write("cls", "a,b,name,label\n1.5,-2,x,0\n\n3,4e-1,\"y, z\",2\n+7,8,w,1\n");
  PluginLibrary lib("csv");
  FakeConfig cfg;
  configure_csv(lib, cfg, path);
  cfg.values["features"] = std::vector<std::string>{"b", "a"};
  cfg.values["targets"] = std::vector<std::string>{"label"};
  Dataset ds(lib, kCsvId, cfg, "train");
  REQUIRE(ds.size() == 3);
  const auto s = ds.get(1);
  CHECK(s.shape("features") == std::vector<int64_t>{2});
  CHECK(s.tensor("features").dtype.code == kDLFloat);
  CHECK(s.values<float>("features")[0] == doctest::Approx(0.4));
  CHECK(s.values<float>("features")[1] == 3.0f);
  CHECK(s.shape("target").empty());
  CHECK(s.tensor("target").dtype.code == kDLInt);
  CHECK(s.values<int64_t>("target")[0] == 2);
  CHECK(ds.get(2).values<float>("features")[1] == 7.0f);  // "+7"
}

TEST_CASE("csv: regression targets, default columns, headerless files") {
  PluginLibrary lib("csv");
  SUBCASE("several float targets; features default to every other column") {
    const auto path = write("reg", "x1,y1,x2,y2\n1,0.5,2,-1.25\n3,1.5,4,2\n");
    FakeConfig cfg;
    configure_csv(lib, cfg, path);
    cfg.values["task"] = std::string("regression");
    cfg.values["targets"] = std::vector<std::string>{"y2", "y1"};
    Dataset ds(lib, kCsvId, cfg, "train");
    const auto s = ds.get(0);
    CHECK(std::vector<float>(s.values<float>("features").begin(), s.values<float>("features").end()) ==
          std::vector<float>{1, 2});
    CHECK(s.shape("target") == std::vector<int64_t>{2});
    CHECK(std::vector<float>(s.values<float>("target").begin(), s.values<float>("target").end()) ==
          std::vector<float>{-1.25f, 0.5f});
  }
  SUBCASE("header = false: columns are named by position, the last is the target") {
    const auto path = write("nohdr", "1;2;3\n4;5;6\n");
    FakeConfig cfg;
    configure_csv(lib, cfg, path);
    cfg.values["header"] = false;
    cfg.values["delimiter"] = std::string(";");
    Dataset ds(lib, kCsvId, cfg, "train");
    REQUIRE(ds.size() == 2);
    CHECK(ds.get(1).values<int64_t>("target")[0] == 6);
    CHECK(ds.get(1).shape("features") == std::vector<int64_t>{2});
  }
}

TEST_CASE("csv: val_split gives disjoint parts covering every row") {
  std::string text = "f,label\n";
  for (int i = 0; i < 20; ++i) text += std::to_string(i) + "," + std::to_string(i % 3) + "\n";
  const auto path = write("split", text);
  PluginLibrary lib("csv");
  FakeConfig cfg;
  configure_csv(lib, cfg, path);
  cfg.values["val_split"] = 0.25;
  Dataset train(lib, kCsvId, cfg, "train");
  Dataset val(lib, kCsvId, cfg, "val");
  CHECK(train.size() == 15);
  CHECK(val.size() == 5);
  std::set<float> seen;
  for (uint64_t i = 0; i < train.size(); ++i) seen.insert(train.get(i).values<float>("features")[0]);
  for (uint64_t i = 0; i < val.size(); ++i) seen.insert(val.get(i).values<float>("features")[0]);
  CHECK(seen.size() == 20);
}

TEST_CASE("csv: errors name the file, the line and the column") {
  PluginLibrary lib("csv");
  SUBCASE("a non-numeric cell in a feature column") {
    const auto path = write("text", "a,name,label\n1,x,0\n");
    FakeConfig cfg;
    configure_csv(lib, cfg, path);
    CHECK(create_status(lib, cfg) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("text.csv:2") != std::string::npos);
    CHECK(lib.host.last_error.find("column 'name'") != std::string::npos);
  }
  SUBCASE("an unknown column lists the real ones") {
    const auto path = write("unknown", "a,label\n1,0\n");
    FakeConfig cfg;
    configure_csv(lib, cfg, path);
    cfg.values["features"] = std::vector<std::string>{"b"};
    CHECK(create_status(lib, cfg) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("columns: a, label") != std::string::npos);
  }
  SUBCASE("a short row") {
    const auto path = write("short", "a,b,label\n1,2,0\n3,1\n");
    FakeConfig cfg;
    configure_csv(lib, cfg, path);
    CHECK(create_status(lib, cfg) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("short.csv:3") != std::string::npos);
  }
  SUBCASE("a fractional class label") {
    const auto path = write("frac", "a,label\n1,0.5\n");
    FakeConfig cfg;
    configure_csv(lib, cfg, path);
    CHECK(create_status(lib, cfg) == TP_ERR_CONFIG);
    CHECK(lib.host.last_error.find("regression") != std::string::npos);
  }
}

// Data trial F6: the csv reader moved to plugins/datasets/common (csv_records.h), shared with
// image_folder's listings; it now drops Excel's byte-order mark (which made the first column's
// name "\ufeffa", so `features = ["a"]` was "not in" the file) and reads a quoted cell across lines.
TEST_CASE("csv: a UTF-8 byte-order mark and CRLF (Excel's CSV UTF-8); a quoted cell spanning lines") {
  const auto path = write("bom", "\xEF\xBB\xBF" "a,note,label\r\n1,\"two\r\nlines\",0\r\n3,x,1\r\n");
  PluginLibrary lib("csv");
  FakeConfig cfg;
  configure_csv(lib, cfg, path);
  cfg.values["features"] = std::vector<std::string>{"a"};
  Dataset ds(lib, kCsvId, cfg, "train");
  REQUIRE(ds.size() == 2);
  CHECK(ds.get(1).values<float>("features")[0] == 3.0f);
  const auto open_quote = write("open_quote", "a,label\n1,0\n\"2,1\n");
  FakeConfig bad;
  configure_csv(lib, bad, open_quote);
  CHECK(create_status(lib, bad) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("open_quote.csv:3: a quoted cell opens here and is never closed") != std::string::npos);
}

// Security trial F3: a FIFO as `path` (or image_folder's `csv`) hung the run in the stream's open,
// deaf to SIGTERM; /dev/zero read for ever. Both are refused before any open (regular_input.h).
TEST_CASE("csv: a FIFO or a device as the file is refused, named, without waiting") {
  PluginLibrary lib("csv");
  const auto dir = tp::test::fresh_fixture_dir("csv_special");
  const auto fifo = dir / "table.csv";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::filesystem::path& special : {fifo, std::filesystem::path("/dev/zero")}) {
    CAPTURE(special);
    FakeConfig cfg;
    configure_csv(lib, cfg, special);
    CHECK(create_status(lib, cfg) == TP_ERR_IO);
    CHECK(lib.host.last_error.find("'" + special.string() + "' (`path`) is a") != std::string::npos);
    CHECK(lib.host.last_error.find("not a regular file") != std::string::npos);
  }
}
