// webdataset.so's several views of each image (views, local_views, plugins/datasets/common
// image_field.h): the same fields and the same pixels as image_folder.so's for the same files,
// seeds and transforms (image_folder_views_test.cpp checks those views themselves).
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "image_folder_support.h"
#include "webdataset_support.h"

namespace fs = std::filesystem;
using namespace tp::test::webdataset;
namespace ift = tp::test::image_folder;

TEST_CASE("webdataset: views and local_views give image_folder's fields and pixels for the same files") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_views");
  const std::string pattern = write_folder_and_shards(dir).pattern;
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
    cfg->values["views"] = int64_t{2};
    cfg->values["local_views"] = int64_t{1};
    cfg->values["local_crop"] = std::vector<int64_t>{8};
  }
  Dataset folder(folder_lib, ift::kId, folder_cfg, "train"), shards(wds_lib, kWebDatasetId, wds_cfg, "train");
  REQUIRE(folder.size() == 4);
  REQUIRE(shards.size() == 4);
  for (uint64_t i = 0; i < folder.size(); ++i)
    for (uint64_t seed : {5u, 77u}) {
      const Sample a = folder.get(i, seed), b = shards.get(i, seed);
      CHECK(b.shape("image_0") == std::vector<int64_t>{3, 16, 16});
      CHECK(b.shape("image_1") == std::vector<int64_t>{3, 16, 16});
      CHECK(b.shape("local_0") == std::vector<int64_t>{3, 8, 8});
      CHECK(a.bytes() == b.bytes());
    }
}
