// webdataset.so through its C ABI on shards written at test time: keys, labels (cls and json) and
// pixels back as written, the same pixels image_folder.so gives for the same files and
// transforms, sample_groups (ABI 1.10), encoded images (ABI 1.11), the splits, concurrent reads, and every hostile shard or
// sample failing with a message that names the shard (what data.on_bad_sample acts on).
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "image_folder_support.h"
#include "tar_index.h"
#include "webdataset_support.h"

namespace fs = std::filesystem;
namespace wds = tp::webdataset;
using namespace tp::test::webdataset;
namespace ift = tp::test::image_folder;

namespace {

/// `count` samples "<first + i>" of PNG images (h x w, salt i) and cls label i % 3.
wds::WrittenShards write_png_shards(const fs::path& dir, int count, uint64_t max_bytes, int h = 12, int w = 16) {
  wds::ShardWriter writer(dir.string(), "s", max_bytes);
  for (int i = 0; i < count; ++i)
    writer.add("k" + std::to_string(1000 + i), {{"png", encoded_image(h, w, i)}, {"cls", std::to_string(i % 3) + "\n"}});
  return writer.finish();
}

/// create() that must fail with `code`; its message must name `named`.
void refused_create(PluginLibrary& lib, const FakeConfig& cfg, tp_status code, const std::string& named,
                    const char* split = "train") {
  CAPTURE(named);
  CHECK(create_status(lib, cfg, split) == code);
  CHECK_MESSAGE(lib.host.last_error.find(named) != std::string::npos, lib.host.last_error);
}

/// get_sample(index) that must fail with TP_ERR_IO naming `named` and `shard`.
void refused_sample(PluginLibrary& lib, const Dataset& ds, uint64_t index, const std::string& shard,
                    const std::string& named) {
  CAPTURE(named);
  const tp_worker_ctx_t ctx = tp::test::worker_ctx(1);
  Sample s;
  CHECK(ds.try_get(index, &ctx, s) == TP_ERR_IO);
  CHECK_MESSAGE(lib.host.last_error.find(shard) != std::string::npos, lib.host.last_error);
  CHECK_MESSAGE(lib.host.last_error.find(named) != std::string::npos, lib.host.last_error);
}

}  // namespace

TEST_CASE("webdataset: keys in shard order, cls labels and exact pixels back as written") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_round_trip");
  const wds::WrittenShards shards = write_png_shards(dir / "shards", 7, 6000);
  REQUIRE(shards.paths.size() >= 3);
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, shards.pattern, dir / "index");
  Dataset ds(lib, kWebDatasetId, cfg, "train");
  REQUIRE(ds.size() == 7);
  for (uint64_t i = 0; i < 7; ++i) {
    const Sample s = ds.get(i, i);
    CHECK(label_value(s) == static_cast<int64_t>(i % 3));
    CHECK(s.shape("label").empty());  // a scalar, as image_folder's
    int h = 0, w = 0;
    const std::vector<float> got = ift::chw(s, &h, &w);
    CHECK(h == 12);
    CHECK(w == 16);
    CHECK(ift::max_abs_diff(got, ift::expected_chw(tp::test::gradient_image(12, 16, static_cast<int>(i)))) == 0.0f);
  }

  // sample_groups: each shard's end, in pattern order.
  const tp_dataset_v1_t& table = ds.table();
  REQUIRE((table.sample_groups != nullptr));
  const uint64_t* ends = nullptr;
  uint64_t count = 0;
  REQUIRE(table.sample_groups(ds.self(), &ends, &count) == TP_OK);
  REQUIRE(count == shards.paths.size());
  uint64_t expected_end = 0;
  for (uint64_t g = 0; g < count; ++g) {
    expected_end += wds::index_shard_file(shards.paths[g]).samples.size();
    CHECK(ends[g] == expected_end);
  }
  CHECK(ends[count - 1] == 7);

  // sample_keys (ABI 1.13): `<shard>:<key>` in index order, for host predict's path column.
  std::vector<std::string> expected_keys;
  for (const std::string& shard : shards.paths)
    for (const wds::IndexedSample& sample : wds::index_shard_file(shard).samples) expected_keys.push_back(shard + ":" + sample.key);
  CHECK(ds.sample_keys() == expected_keys);
}

TEST_CASE("webdataset: a row is named by the file its json member records; shard_key keeps <shard>:<key>") {
  // Data trial F5: host predict named rows `<shard>:<key>` though host shards write records each
  // sample's file (json "source"), so finding a misclassified image meant opening the tar.
  const fs::path dir = tp::test::fresh_fixture_dir("wds_sample_names");
  const std::vector<unsigned char> png = encoded_image(4, 4, 0);
  const std::string image(png.begin(), png.end());
  const std::string shard = (dir / "val-000000.tar").string();
  write_raw_tar(shard, {{"000000.png", image}, {"000000.cls", "0"},
                        {"000000.json", "{\"label\":0,\"class\":\"cat\",\"source\":\"cat/\u00fcn\u00ef 1.png\"}"},
                        {"000001.png", image}, {"000001.cls", "1"},  // no json: another tool's shard
                        {"000002.png", image}, {"000002.cls", "1"}, {"000002.json", "{\"label\":1}"},
                        {"000003.png", image}, {"000003.cls", "1"}, {"000003.json", "not json"}});
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, shard, dir / "index");
  const Dataset ds(lib, kWebDatasetId, cfg, "train");
  CHECK(ds.sample_keys() == std::vector<std::string>{"cat/\xC3\xBCn\xC3\xAF 1.png", shard + ":000001", shard + ":000002",
                                                     shard + ":000003"});
  // Beside host shards write's shards, its description records the folder the sources are relative to.
  write_text(dir / "val-shards.json", "{\"pattern\": \"val-000000.tar\", \"classes\": [\"cat\", \"dog\"], "
                                      "\"source\": {\"root\": \"/data/photos\"}}");
  const Dataset described(lib, kWebDatasetId, cfg, "train");
  CHECK(described.sample_keys()[0] == "/data/photos/cat/\xC3\xBCn\xC3\xAF 1.png");
  CHECK(described.sample_keys()[1] == shard + ":000001");
  cfg.values["sample_names"] = std::string("shard_key");
  const Dataset by_key(lib, kWebDatasetId, cfg, "train");
  CHECK(by_key.sample_keys() == std::vector<std::string>{shard + ":000000", shard + ":000001", shard + ":000002",
                                                         shard + ":000003"});
  cfg.values["sample_names"] = std::string("path");
  CHECK(create_status(lib, cfg) == TP_ERR_CONFIG);
  CHECK(lib.host.last_error.find("sample_names = \"path\" is none of \"source\"") != std::string::npos);
}

TEST_CASE("webdataset: sample_groups leaves empty shards out; index order is pattern order, then tar order") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_groups");
  const std::vector<unsigned char> png = encoded_image(4, 4, 0);
  write_raw_tar(dir / "p-0.tar", {{"b.png", std::string(png.begin(), png.end())}, {"b.cls", "0"}, {"a.png", "x"},
                                  {"a.cls", "1"}});
  write_raw_tar(dir / "p-1.tar", {});          // the end-of-archive blocks only
  write_text(dir / "p-2.tar", "");             // 0 bytes
  write_raw_tar(dir / "p-3.tar", {{"c.png", "x"}, {"c.cls", "2"}, {"d.png", "x"}, {"d.cls", "0"}, {"e.png", "x"},
                                  {"e.cls", "1"}});
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, (dir / "p-{0..3}.tar").string(), dir / "index");
  Dataset ds(lib, kWebDatasetId, cfg, "train");
  REQUIRE(ds.size() == 5);
  const uint64_t* ends = nullptr;
  uint64_t count = 0;
  REQUIRE(ds.table().sample_groups(ds.self(), &ends, &count) == TP_OK);
  CHECK(std::vector<uint64_t>(ends, ends + count) == std::vector<uint64_t>{2, 5});
  CHECK(label_value(ds.get(0)) == 0);  // b before a: tar order, not sorted
  CHECK(last_log(lib).find("4 shards (2 empty), 5 samples") != std::string::npos);
}

TEST_CASE("webdataset: json labels, image_extensions' order, extensions in any case") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_json");
  wds::ShardWriter writer((dir / "shards").string(), "j", 1 << 20);
  const std::vector<unsigned char> png = encoded_image(8, 8, 3), jpg = encoded_image(8, 8, 3, ".jpg");
  writer.add("a", {{"json", "{\"label\": 4, \"y\": 7}"}, {"png", png}});
  writer.add("b", {{"JPG", jpg}, {"png", png}, {"json", "{\"label\": 0, \"y\": 1}"}});  // png wins: listed first below
  const wds::WrittenShards shards = writer.finish();
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, shards.pattern, dir / "index");
  cfg.values["label_extension"] = std::string("JSON");
  cfg.values["image_extensions"] = std::vector<std::string>{".png", "jpg"};
  {
    Dataset ds(lib, kWebDatasetId, cfg, "train");
    CHECK(label_value(ds.get(0)) == 4);
    CHECK(label_value(ds.get(1)) == 0);
    int h = 0, w = 0;
    CHECK(ift::max_abs_diff(ift::chw(ds.get(1), &h, &w), ift::expected_chw(tp::test::gradient_image(8, 8, 3))) == 0.0f);
  }
  cfg.values["json_label_key"] = std::string("y");
  Dataset by_y(lib, kWebDatasetId, cfg, "train");
  CHECK(label_value(by_y.get(0)) == 7);
  cfg.values["image_extensions"] = std::vector<std::string>{"json"};
  refused_create(lib, cfg, TP_ERR_CONFIG, "both in image_extensions and label_extension");
}

TEST_CASE("webdataset: the same files give image_folder's pixels, transforms and seeds alike") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_vs_image_folder");
  const auto [pattern, labels] = write_folder_and_shards(dir);
  PluginLibrary folder_lib("image_folder"), wds_lib("webdataset");
  FakeConfig folder_cfg, wds_cfg;
  ift::configure(folder_lib, folder_cfg, dir / "folder");
  configure(wds_lib, wds_cfg, pattern, dir / "index");
  for (FakeConfig* cfg : {&folder_cfg, &wds_cfg}) {
    cfg->values["random_resized_crop"] = std::vector<int64_t>{16};
    cfg->values["resize"] = std::vector<int64_t>{20};
    cfg->values["center_crop"] = std::vector<int64_t>{16};
    cfg->values["hflip"] = 0.5;
    cfg->values["brightness"] = 0.4;
    cfg->values["rand_augment"] = std::vector<int64_t>{2, 9};
    cfg->values["random_erasing"] = 0.5;
    cfg->values["mean"] = std::vector<double>{0.485, 0.456, 0.406};
    cfg->values["std"] = std::vector<double>{0.229, 0.224, 0.225};
  }
  for (const char* split : {"train", "val"}) {
    CAPTURE(split);
    if (std::string(split) == "val") {
      folder_cfg.values["val_root"] = (dir / "folder").string();
      wds_cfg.values["val_shards"] = pattern;
    }
    Dataset folder(folder_lib, ift::kId, folder_cfg, split), shards(wds_lib, kWebDatasetId, wds_cfg, split);
    REQUIRE(folder.size() == shards.size());
    for (uint64_t i = 0; i < folder.size(); ++i)
      for (uint64_t seed : {1u, 77u, 12345u}) {
        const Sample a = folder.get(i, seed), b = shards.get(i, seed);
        CHECK(a.bytes() == b.bytes());
        CHECK(label_value(b) == labels[i]);
      }
  }
}

TEST_CASE("webdataset: encoded images (ABI 1.11) are the shard member's bytes with image_folder's box") {
  // The same JPEG and PNG files as a folder and as shards: asked for the encoded form, both
  // plugins hand over the same bytes, box and label for every seed, and declare alike.
  const fs::path dir = tp::test::fresh_fixture_dir("wds_encoded");
  wds::ShardWriter writer((dir / "shards").string(), "e", 1 << 20);
  const std::vector<std::pair<int, int>> sizes = {{37, 53}, {61, 29}, {24, 24}};
  for (int k = 0; k < 4; ++k) {
    const char* ext = k == 3 ? ".png" : ".jpg";
    const auto [h, w] = sizes[static_cast<std::size_t>(k % 3)];
    const std::vector<unsigned char> bytes = encoded_image(h, w, 7 * k, ext);
    fs::create_directories(dir / "folder" / "c0");
    write_text(dir / "folder" / "c0" / ("img_" + std::to_string(k) + ext), std::string(bytes.begin(), bytes.end()));
    writer.add("c0/img_" + std::to_string(k), {{ext + 1, bytes}, {"cls", "0"}});
  }
  const std::string pattern = writer.finish().pattern;
  PluginLibrary folder_lib("image_folder"), wds_lib("webdataset");
  FakeConfig folder_cfg, wds_cfg;
  ift::configure(folder_lib, folder_cfg, dir / "folder");
  configure(wds_lib, wds_cfg, pattern, dir / "index");
  for (FakeConfig* cfg : {&folder_cfg, &wds_cfg}) {
    cfg->values["random_resized_crop"] = std::vector<int64_t>{16};
    cfg->values["resize"] = std::vector<int64_t>{20};
    cfg->values["center_crop"] = std::vector<int64_t>{16};
    cfg->values["hflip"] = 0.5;
    cfg->values["fast_decode"] = false;
  }
  folder_cfg.values["val_root"] = (dir / "folder").string();
  wds_cfg.values["val_shards"] = pattern;
  for (const char* split : {"train", "val"}) {
    CAPTURE(split);
    Dataset folder(folder_lib, ift::kId, folder_cfg, split), shards(wds_lib, kWebDatasetId, wds_cfg, split);
    REQUIRE(shards.size() == 4);
    const tp_encoded_image_t* images = nullptr;
    uint32_t count = 0;
    REQUIRE((shards.table().encoded_images != nullptr));
    REQUIRE(shards.table().encoded_images(shards.self(), &images, &count) == TP_OK);
    REQUIRE(count == 1);
    CHECK(images[0].available == 1);
    CHECK(images[0].out_height == 16);
    for (uint64_t i = 0; i < shards.size(); ++i)
      for (uint64_t seed : {1u, 77u, 12345u}) {
        CAPTURE(i);
        const Sample a = ift::encoded_sample(folder, i, seed), b = ift::encoded_sample(shards, i, seed);
        CHECK(a.bytes() == b.bytes());  // image bytes, image_box, label
        CHECK(ift::box_of(b)[5] == (i == 3 ? 0 : sizes[i % 3].first));
      }
  }
  // A key that changes decoded pixels keeps train on the CPU path, naming it.
  wds_cfg.values["trivial_augment"] = true;
  Dataset augmented(wds_lib, kWebDatasetId, wds_cfg, "train");
  const tp_encoded_image_t* images = nullptr;
  uint32_t count = 0;
  REQUIRE(augmented.table().encoded_images(augmented.self(), &images, &count) == TP_OK);
  REQUIRE(count == 1);
  CHECK(images[0].available == 0);
  CHECK(std::string(images[0].reason).find("trivial_augment") != std::string::npos);
  CHECK(ift::encoded_sample(augmented, 0, 1).tensor("image").dtype.code == kDLFloat);
}

TEST_CASE("webdataset: splits read their own shards; get_sample is the same from several threads") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_splits");
  const wds::WrittenShards train = write_png_shards(dir / "train", 6, 6000);
  const wds::WrittenShards held_out = write_png_shards(dir / "val", 2, 1 << 20, 12, 16);
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, train.pattern, dir / "index");
  cfg.values["hflip"] = 0.5;
  cfg.values["random_resized_crop"] = std::vector<int64_t>{8};
  cfg.values["center_crop"] = std::vector<int64_t>{8};
  refused_create(lib, cfg, TP_ERR_CONFIG, "the val split needs `val_shards`", "val");
  refused_create(lib, cfg, TP_ERR_CONFIG, "the test split needs `test_shards`", "test");
  cfg.values["val_shards"] = held_out.pattern;
  cfg.values["test_shards"] = held_out.pattern;
  for (const char* split : {"val", "test"}) {
    Dataset ds(lib, kWebDatasetId, cfg, split);
    CHECK(ds.size() == 2);
    CHECK(ds.get(1, 5).bytes() == ds.get(1, 6).bytes());  // no augmentation outside train
  }
  Dataset ds(lib, kWebDatasetId, cfg, "train");
  std::vector<std::vector<uint8_t>> serial;
  for (uint64_t i = 0; i < ds.size(); ++i) serial.push_back(ds.get(i, 100 + i).bytes());
  std::vector<std::thread> workers;
  workers.reserve(4);
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (uint64_t i = static_cast<uint64_t>(t) % ds.size(); i < ds.size(); i += 2)
          if (ds.get(i, 100 + i, static_cast<uint32_t>(t)).bytes() != serial[i]) ++mismatches[static_cast<std::size_t>(t)];
    });
  for (auto& w : workers) w.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("webdataset: hostile shards fail create with the shard named") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_hostile_create");
  const wds::WrittenShards good = write_png_shards(dir / "good", 2, 1 << 20);
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, good.pattern, dir / "index");
  SUBCASE("a missing shard") {
    cfg.values["shards"] = (dir / "good" / "s-{000000..000001}.tar").string();
    refused_create(lib, cfg, TP_ERR_IO, "'" + (dir / "good" / "s-000001.tar").string() + "', cannot be read");
  }
  SUBCASE("a pattern of too many shards") {
    cfg.values["shards"] = (dir / "s-{0..100000}.tar").string();
    refused_create(lib, cfg, TP_ERR_CONFIG, "more than 100000 shard names");
  }
  SUBCASE("a truncated shard") {
    const std::string cut = (dir / "cut.tar").string();
    write_text(cut, file_text(good.paths[0]).substr(0, 530));  // the header and 18 bytes of the PNG
    cfg.values["shards"] = cut;
    refused_create(lib, cfg, TP_ERR_IO, "'" + cut + "' is truncated: the member 'k1000.png' whose header is at byte 0");
  }
  SUBCASE("not a tar") {
    const std::string text = (dir / "text.tar").string();
    write_text(text, "hello, world\n");
    cfg.values["shards"] = text;
    refused_create(lib, cfg, TP_ERR_IO, "'" + text + "' is not a tar archive");
  }
  SUBCASE("every shard empty") {
    write_text(dir / "e-0.tar", "");
    write_raw_tar(dir / "e-1.tar", {{"d/", ""}, {"__meta__", "x"}});
    cfg.values["shards"] = (dir / "e-{0..1}.tar").string();
    refused_create(lib, cfg, TP_ERR_IO, "is empty (2 shards, the first '" + (dir / "e-0.tar").string() + "')");
  }
  SUBCASE("prepare fails as create does") {
    cfg.values["shards"] = (dir / "nowhere-{0..1}.tar").string();
    CHECK(lib.dataset_table(kWebDatasetId).prepare(&lib.host.host, &cfg.view, "train") == TP_ERR_IO);
    CHECK(lib.host.last_error.find((dir / "nowhere-0.tar").string()) != std::string::npos);
  }
}

TEST_CASE("webdataset: bad samples fail get_sample naming the shard, the key and what is wrong") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_bad_samples");
  const std::string png = [] {
    const std::vector<unsigned char> b = encoded_image(8, 8, 1);
    return std::string(b.begin(), b.end());
  }();
  const std::string shard = (dir / "bad.tar").string();
  write_raw_tar(shard, {{"ok.png", png},           {"ok.cls", "1"},            // 0: fine
                        {"nolabel.png", png},                                  // 1: no label member
                        {"noimage.cls", "2"},                                  // 2: no image member
                        {"word.png", png},         {"word.cls", "three"},      // 3: not a class id
                        {"neg.png", png},          {"neg.cls", "-1"},          // 4: not a class id either
                        {"../up.png", png},        {"../up.cls", "0"},         // 5: a '..' component
                        {"/abs.png", png},         {"/abs.cls", "0"},          // 6: absolute
                        {"broken.png", "not an image"}, {"broken.cls", "0"},   // 7: does not decode
                        {"last.png", png},         {"last.cls", "0"}});        // 8: fine
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, shard, dir / "index");
  Dataset ds(lib, kWebDatasetId, cfg, "train");
  REQUIRE(ds.size() == 9);
  CHECK(label_value(ds.get(0)) == 1);
  refused_sample(lib, ds, 1, shard, "sample 'nolabel' at byte ");
  refused_sample(lib, ds, 1, shard, "has no label member (label_extension = cls); its members are [png]");
  refused_sample(lib, ds, 2, shard, "sample 'noimage' at byte ");
  refused_sample(lib, ds, 2, shard,
                 "has no image member (image_extensions = [jpg, jpeg, png, ppm, bmp, pgm, tif, tiff, webp])");
  refused_sample(lib, ds, 2, shard, "its members are [cls]; a sample needs its image in a member <key>.<one of "
                                    "image_extensions>");
  refused_sample(lib, ds, 3, shard, "member 'word.cls' holds 'three', not a class id");
  refused_sample(lib, ds, 4, shard, "holds '-1', not a class id");
  refused_sample(lib, ds, 5, shard, "the member '../up.png' at byte ");
  refused_sample(lib, ds, 5, shard, "has a '..' component");
  refused_sample(lib, ds, 6, shard, "is absolute");
  refused_sample(lib, ds, 7, shard, "webdataset: cannot decode '" + shard + ":broken.png'");
  CHECK(label_value(ds.get(8)) == 0);

  // A shard that changes after create: a member now claims more than its sample's bytes.
  patch_member_size(shard, 0, 1 << 20);  // ok.png, the first header
  refused_sample(lib, ds, 0, shard, "declares 1048576 bytes, more than the sample's");
  CHECK(label_value(ds.get(8)) == 0);  // the other samples read as before
}

TEST_CASE("webdataset: a shard's last sample ends at the archive's end; a sample past 1 GiB fails naming the shard") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_sample_bounds");
  PluginLibrary lib("webdataset");
  FakeConfig cfg;

  // Issue 58, item 7: the last sample was read to the end of the file, so a sparse tail (no disk)
  // cost its size in memory on every read; 64 GiB ended in an unnamed bad_alloc.
  const wds::WrittenShards tail = write_png_shards(dir / "tail", 3, 1 << 20);
  REQUIRE(tail.paths.size() == 1);
  const auto archive_bytes = static_cast<off_t>(fs::file_size(tail.paths[0]));
  REQUIRE(::truncate(tail.paths[0].c_str(), archive_bytes + (off_t{64} << 30)) == 0);
  configure(lib, cfg, tail.pattern, dir / "index");
  {
    Dataset ds(lib, kWebDatasetId, cfg, "train");
    REQUIRE(ds.size() == 3);
    CHECK(label_value(ds.get(2)) == 2);  // the last sample: its members, not the 64 GiB after them
    CHECK(label_value(ds.get(0)) == 0);
  }

  // A member whose declared size (the data a sparse hole) takes its sample past the 1 GiB limit:
  // refused naming the shard, the key and the limit, before a byte of it is read or allocated;
  // as a shard's last sample and as one followed by another.
  const std::string png = [] {
    const std::vector<unsigned char> b = encoded_image(8, 8, 1);
    return std::string(b.begin(), b.end());
  }();
  const std::string last = (dir / "big_last.tar").string();
  write_raw_tar(last, {{"a.png", png}, {"a.cls", "0"}, {"b.cls", "1"}, {"b.png", png}});
  const std::size_t b_png = 3 * 512 + 2 * 512 + ((png.size() + 511) / 512) * 512;  // a.png, a.cls, b.cls headers
  patch_member_size(last, b_png, uint64_t{2} << 30);
  REQUIRE(::truncate(last.c_str(), static_cast<off_t>(b_png + 512 + (uint64_t{2} << 30) + 1024)) == 0);
  cfg.values["shards"] = last;
  {
    Dataset ds(lib, kWebDatasetId, cfg, "train");
    REQUIRE(ds.size() == 2);
    CHECK(label_value(ds.get(0)) == 0);
    refused_sample(lib, ds, 1, last, "sample 'b' at byte ");
    refused_sample(lib, ds, 1, last, "bytes, more than the 1073741824 a sample may take");
  }
  const std::string middle = (dir / "big_middle.tar").string();
  write_raw_tar(middle, {{"a.cls", "0"}, {"a.png", png}});
  const std::string next = (dir / "next.tar").string();
  write_raw_tar(next, {{"b.png", png}, {"b.cls", "1"}});
  patch_member_size(middle, 512 + 512, uint64_t{2} << 30);  // a.png's header
  {
    const std::string next_bytes = file_text(next);
    std::fstream out(middle, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(512 + 512 + 512 + (uint64_t{2} << 30)));
    out.write(next_bytes.data(), static_cast<std::streamsize>(next_bytes.size()));
  }
  cfg.values["shards"] = middle;
  {
    Dataset ds(lib, kWebDatasetId, cfg, "train");
    REQUIRE(ds.size() == 2);
    refused_sample(lib, ds, 0, middle, "sample 'a' at byte 0: its bytes run to byte ");
    refused_sample(lib, ds, 0, middle, "more than the 1073741824 a sample may take");
    CHECK(label_value(ds.get(1)) == 1);
  }
}

// Data trial F4: `host shards write` stores each image under its file's ending, and image_folder's
// default endings took .bmp where webdataset's default image_extensions (jpg jpeg png webp) did
// not, so shards written from a folder with defaults failed every .bmp sample read with defaults.
// Both defaults are now torchvision's IMG_EXTENSIONS (image_extensions.h).
TEST_CASE("webdataset: the default image_extensions read every ending image_folder's default lists") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_default_endings");
  const std::string shard = (dir / "endings.tar").string();
  std::vector<std::pair<std::string, std::string>> members;
  const std::vector<std::string> endings{"bmp", "tif", "tiff", "ppm", "jpg", "png", "webp"};
  for (std::size_t i = 0; i < endings.size(); ++i) {
    const std::vector<unsigned char> bytes = encoded_image(8, 10, static_cast<int>(i), ("." + endings[i]).c_str());
    members.emplace_back("k" + std::to_string(i) + "." + endings[i], std::string(bytes.begin(), bytes.end()));
    members.emplace_back("k" + std::to_string(i) + ".cls", std::to_string(i));
  }
  members.emplace_back("k9.heic", "heic bytes");  // an image the decoders do not read: named in the message
  members.emplace_back("k9.cls", "0");
  write_raw_tar(shard, members);
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, shard, dir / "index");
  Dataset ds(lib, kWebDatasetId, cfg, "train");
  REQUIRE(ds.size() == endings.size() + 1);
  for (std::size_t i = 0; i < endings.size(); ++i) {
    CAPTURE(endings[i]);
    const Sample s = ds.get(i);
    CHECK(label_value(s) == static_cast<int64_t>(i));
    const std::vector<unsigned char> bytes = encoded_image(8, 10, static_cast<int>(i), ("." + endings[i]).c_str());
    int h = 0, w = 0;
    CHECK(ift::max_abs_diff(ift::chw(s, &h, &w), ift::expected_chw(cv::imdecode(bytes, cv::IMREAD_COLOR))) == 0.0f);
  }
  // The message says which key to extend, with the whole list to paste.
  refused_sample(lib, ds, endings.size(), shard,
                 "its members are [heic, cls]; if \"heic\" holds the image, add it to `image_extensions` in this "
                 "dataset's table: image_extensions = [\"jpg\", \"jpeg\", \"png\", \"ppm\", \"bmp\", \"pgm\", "
                 "\"tif\", \"tiff\", \"webp\", \"heic\"]");
}
