// image_folder.so with `multi_label = true`: a csv row's label cell lists any number of labels,
// and the sample's "label" is multi-hot float32 [C] (what org.torchhost.bce_with_logits and
// org.torchhost.multilabel read). Names or class ids, any separator, an image with no label, and
// the refusals: class folders, a path listed with two sets, ids mixed with names.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

namespace {

std::filesystem::path write_pngs(const std::string& name, int count) {
  const std::filesystem::path root = tp::test::fresh_fixture_dir(name);
  std::filesystem::create_directories(root / "img");
  for (int i = 0; i < count; ++i)
    REQUIRE(cv::imwrite((root / "img" / (std::to_string(i) + ".png")).string(), tp::test::gradient_image(6, 6, i)));
  return root;
}

/// A train split over the csv `text` with `separator`.
void multi_config(const PluginLibrary& lib, FakeConfig& cfg, const std::filesystem::path& root, const std::string& text,
                  const std::string& separator) {
  std::ofstream(root / "list.csv", std::ios::binary | std::ios::trunc) << text;
  configure(lib, cfg, root / "img");
  cfg.values["csv"] = (root / "list.csv").string();
  cfg.values["multi_label"] = true;
  cfg.values["label_separator"] = separator;
}

/// The sample's "label": float32 [C].
std::vector<float> hot(const Sample& s) {
  const DLTensor& t = s.tensor("label");
  REQUIRE(t.ndim == 1);
  REQUIRE(t.dtype.code == kDLFloat);
  const auto values = s.values<float>("label");
  return {values.begin(), values.end()};
}

}  // namespace

TEST_CASE("image_folder multi_label: each row's labels as a multi-hot float vector, names sorted into classes") {
  const std::filesystem::path root = write_pngs("if_multilabel", 4);
  struct Case {
    std::string name, text, separator;
  };
  // 0.png: cat and dog; 1.png: none; 2.png: bird; 3.png: dog, cat (in another order), a repeat.
  for (const Case& c : {Case{"';' with spaces", "path,labels\n0.png,cat; dog\n1.png,\n2.png,bird\n3.png,dog;cat;dog\n", ";"},
                        Case{"Kaggle's spaces", "path,tags\n0.png,cat  dog\n1.png,\n2.png,bird\n3.png,dog cat\n", " "},
                        Case{"'|'", "0.png,cat|dog\n1.png,\n2.png,bird\n3.png,dog|cat|\n", "|"}}) {
    CAPTURE(c.name);
    PluginLibrary lib("image_folder");
    FakeConfig cfg;
    multi_config(lib, cfg, root, c.text, c.separator);
    Dataset ds(lib, kId, cfg, "train");
    REQUIRE(ds.size() == 4);
    CHECK(ds.class_names() == std::vector<std::string>{"bird", "cat", "dog"});
    CHECK(hot(ds.get(0)) == std::vector<float>{0, 1, 1});
    CHECK(hot(ds.get(1)) == std::vector<float>{0, 0, 0});  // an image with no label
    CHECK(hot(ds.get(2)) == std::vector<float>{1, 0, 0});
    CHECK(hot(ds.get(3)) == std::vector<float>{0, 1, 1});
  }
  // Class ids: "0".."max", no names lent.
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  multi_config(lib, cfg, root, "0.png,0 3\n1.png,\n2.png,1\n3.png,3\n", " ");
  Dataset ds(lib, kId, cfg, "train");
  CHECK(ds.class_names().empty());
  CHECK(hot(ds.get(0)) == std::vector<float>{1, 0, 0, 1});
  CHECK(hot(ds.get(2)) == std::vector<float>{0, 1, 0, 0});
}

TEST_CASE("image_folder multi_label: class folders, a path with two label sets and ids among names are refused") {
  const std::filesystem::path root = write_pngs("if_multilabel_refused", 2);
  const auto refused = [&](const std::string& text, const std::string& says, bool with_csv = true) {
    PluginLibrary lib("image_folder");
    FakeConfig cfg;
    multi_config(lib, cfg, root, text, ";");
    if (!with_csv) cfg.values["csv"] = std::string();
    void* self = nullptr;
    CAPTURE(text);
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    CHECK_MESSAGE(lib.host.last_error.find(says) != std::string::npos, lib.host.last_error);
  };
  refused("", "multi_label = true reads the labels of each image from a csv listing", /*with_csv=*/false);
  refused("0.png,cat;dog\n1.png,cat\n0.png,dog\n", "is listed with label 'dog', and on line 1 with label 'cat;dog'");
  refused("0.png,cat;7\n1.png,dog\n", "label '7' is an integer among names");
  refused("0.png,\n1.png,\n", "lists no label at all");
}
