// image_folder.so's listing through its C ABI: the listing cache (prepare writes it, create
// reads it until a folder changes; a team's cache_dir, read only for the others), link loops in a
// class folder, and a training class without an image.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <doctest/doctest.h>

#include "image_folder_support.h"

using namespace tp::test::image_folder;

TEST_CASE("image_folder: cache = true, prepare writes the listing once; create reads it until a folder changes") {
  const Fixture f = write_folder("if_cache", 8, 8);
  const auto cache_dir = f.root.parent_path() / "if_cache_index";
  std::filesystem::remove_all(cache_dir);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["cache"] = true;
  cfg.values["cache_dir"] = cache_dir.string();
  const tp_dataset_v1_t& table = lib.dataset_table(kId);
  REQUIRE((table.prepare != nullptr));

  // create without prepare scans and writes nothing: only prepare (one rank per node) writes.
  { Dataset before(lib, kId, cfg, "train"); CHECK(before.size() == 9); }
  CHECK_FALSE(std::filesystem::exists(cache_dir));
  REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(cache_dir)) files.push_back(entry.path());
  REQUIRE(files.size() == 1); // no temporary file left beside it
  CHECK(files[0].extension() == ".index");

  // Proof that create reads the cache: point its row of cat/img_1.png at cat/img_2.png (a row
  // moved to another class's folder is refused: its label is its folder's, security trial F8).
  std::ostringstream read;
  read << std::ifstream(files[0]).rdbuf();
  std::string text = read.str();
  const std::string from = (f.root / "cat" / "img_1.png").string(), to = (f.root / "cat" / "img_2.png").string();
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  std::ofstream(files[0], std::ios::trunc) << text;
  int h = 0, w = 0;
  {
    Dataset cached(lib, kId, cfg, "train");
    REQUIRE(cached.size() == 9);
    CHECK(max_abs_diff(chw(cached.get(4), &h, &w), expected_chw(f.images[1][2])) == 0.0f);
  }
  // A new file changes its folder's time: the cache is stale, create scans again (10 images).
  REQUIRE(cv::imwrite((f.root / "cat" / "img_9.png").string(), tp::test::gradient_image(8, 8, 99)));
  std::filesystem::last_write_time(f.root / "cat",
                                   std::filesystem::last_write_time(f.root / "cat") + std::chrono::seconds(2));
  {
    Dataset rescanned(lib, kId, cfg, "train");
    CHECK(rescanned.size() == 10);
    CHECK(max_abs_diff(chw(rescanned.get(4), &h, &w), expected_chw(f.images[1][1])) == 0.0f);
  }
  // The test split serves from the same cache machinery; a split name it does not know is refused.
  CHECK(table.prepare(&lib.host.host, &cfg.view, "validation") == TP_ERR_INVALID_ARGUMENT);
}

/// The lines `lib` logged at `level` that hold `text`.
static int logged(const PluginLibrary& lib, int32_t level, const std::string& text) {
  int count = 0;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    count += lib.host.log_levels[i] == level && lib.host.logs[i].find(text) != std::string::npos;
  return count;
}

TEST_CASE("image_folder: a link loop in a class folder is not followed, warned once; a link to itself is skipped") {
  // The ops trial (finding 5): `dog/loop/up -> ..` or `eel/self.png -> self.png` ended create with
  // TP_ERR_INTERNAL "filesystem error: ... Too many levels of symbolic links" and a 1 KB path.
  const Fixture f = write_folder("if_loops", 8, 8);
  std::filesystem::create_directories(f.root / "dog" / "loop");
  std::filesystem::create_directory_symlink("..", f.root / "dog" / "loop" / "up");
  std::filesystem::create_symlink("self.png", f.root / "cat" / "self.png");
  std::filesystem::create_symlink("nowhere.png", f.root / "cat" / "dangling.png");
  std::filesystem::create_directory_symlink("../../bird", f.root / "cat" / "sub" / "birds");  // no loop: followed
  std::filesystem::create_symlink("eel", f.root / "eel");  // a "class folder" that is a link to itself
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  Dataset ds(lib, kId, cfg, "train");
  CHECK(ds.size() == 12);  // 3 classes of 3, and bird's 3 again through cat/sub/birds; dog's once
  CHECK(logged(lib, TP_LOG_WARNING, "image_folder (train): 'dog/loop/up' links back to a folder it is inside") == 1);
  CHECK(logged(lib, TP_LOG_WARNING, "link loop") == 1);
  CHECK(logged(lib, TP_LOG_INFO, "12 images, 3 classes") == 1);
}

TEST_CASE("image_folder: a team's cache_dir, another user's that only it writes, is read with an info line") {
  // The ops trial (finding 7): every run of a reader warned that "other users can write to it" and
  // told them to let one user own it with mode 0755, which was what the team had done.
  if (::geteuid() != 0) return;  // needs a directory of another user (the CI runs as root)
  const Fixture f = write_folder("if_team_cache", 8, 8);
  const auto cache_dir = f.root.parent_path() / "if_team_cache_index";
  std::filesystem::remove_all(cache_dir);
  {
    PluginLibrary owner("image_folder");
    FakeConfig cfg;
    configure(owner, cfg, f.root);
    cfg.values["cache"] = true;
    cfg.values["cache_dir"] = cache_dir.string();
    REQUIRE(owner.dataset_table(kId).prepare(&owner.host.host, &cfg.view, "train") == TP_OK);
  }
  // The owner is now uid 65534, mode 0755: only it can write there; this process reads.
  REQUIRE(::chown(cache_dir.c_str(), 65534, 65534) == 0);
  REQUIRE(::chmod(cache_dir.c_str(), 0755) == 0);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["cache"] = true;
  cfg.values["cache_dir"] = cache_dir.string();
  REQUIRE(lib.dataset_table(kId).prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
  { Dataset read(lib, kId, cfg, "train"); CHECK(read.size() == 9); }
  CHECK(logged(lib, TP_LOG_WARNING, "") == 0);
  CHECK(logged(lib, TP_LOG_INFO, "belongs to uid 65534 (not you, uid 0) with mode 0755, so it is read only for you") == 1);
  CHECK(logged(lib, TP_LOG_INFO, "this split's listing was read from it") == 1);
  CHECK(logged(lib, TP_LOG_INFO, "9 images, 3 classes (listing read from the cache)") == 1);
  for (const std::string& line : lib.host.logs) CHECK(line.find("Let one user own it") == std::string::npos);
  // A folder changed since its owner prepared it: the listing is scanned, and that is worth a warning.
  std::filesystem::last_write_time(f.root / "cat",
                                   std::filesystem::last_write_time(f.root / "cat") + std::chrono::seconds(2));
  { Dataset scanned(lib, kId, cfg, "train"); CHECK(scanned.size() == 9); }
  CHECK(logged(lib, TP_LOG_WARNING, "it holds no up-to-date listing of these folders, so they were scanned") == 1);
  REQUIRE(::chown(cache_dir.c_str(), 0, 0) == 0);
}

// A fine-tuning trial's stray empty `zebra` folder became a class without a word (torchvision's
// ImageFolder refuses it); held-out splits may keep empty folders to align their labels.
TEST_CASE("image_folder: a class without a training image is warned of, naming it; val is not") {
  const Fixture f = write_folder("if_empty_class", 12, 16);
  std::filesystem::create_directories(f.root / "zebra");
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["val_root"] = f.root.string();
  const Dataset train(lib, kId, cfg, "train");
  CHECK(train.class_names() == std::vector<std::string>{"bird", "cat", "dog", "zebra"});
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < lib.host.logs.size(); ++i)
    if (lib.host.log_levels[i] == TP_LOG_WARNING) warnings.push_back(lib.host.logs[i]);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("1 of 4 classes have no training image ('zebra')") != std::string::npos);
  lib.host.logs.clear();
  lib.host.log_levels.clear();
  const Dataset val(lib, kId, cfg, "val");
  CHECK(logged(lib, TP_LOG_WARNING, "have no training image") == 0);
  // Its one warning: val_root is root here (data trial F25's warning).
  CHECK(std::count(lib.host.log_levels.begin(), lib.host.log_levels.end(), TP_LOG_WARNING) == 1);
}

TEST_CASE("image_folder: images per class in the info line; a class val_split emptied is named with val_split as cause") {
  // Data trials F3, F4: the warning said to remove the "empty" folder of a class val_split had
  // taken every image of, and no line showed the images per class.
  const Fixture f = write_folder("if_split_classes", 8, 8);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  cfg.values["val_split"] = 0.7;  // 7 of 9 to val: per class 3 * 2 / 9 training images, 2 by remainder
  cfg.values["val_split_stratified"] = true;
  const Dataset train(lib, kId, cfg, "train");
  CHECK(train.size() == 2);
  CHECK(logged(lib, TP_LOG_INFO, "image_folder (train): 2 images, 3 classes; images per class: bird 1, cat 1, dog 0") == 1);
  CHECK(logged(lib, TP_LOG_WARNING, "1 of 3 classes got no training image: val_split = 0.7 (stratified) held out all "
                                    "their images ('dog' (3 images))") == 1);
  CHECK(logged(lib, TP_LOG_WARNING, "Remove the empty class folder") == 0);
  const Dataset val(lib, kId, cfg, "val");
  CHECK(logged(lib, TP_LOG_INFO, "image_folder (val): 7 images, 3 classes; images per class: bird 2, cat 2, dog 3") == 1);
}

// Data trial F7: a class folder with a Latin-1 name (an old zip, a Windows share) or a tab passed
// the scan and failed later in the host's check of the names the plugin lends, with a message
// about the plugin ABI that named no folder and said nothing to do.
TEST_CASE("image_folder: a class folder whose name is not UTF-8 text is refused at create, naming it") {
  for (const std::string& bad : {std::string("caf\xe9"), std::string("a\tb")}) {
    const Fixture f = write_folder("if_bad_class_name", 8, 8);
    std::filesystem::create_directories(f.root / bad);
    REQUIRE(cv::imwrite((f.root / bad / "0.png").string(), tp::test::gradient_image(8, 8, 1)));
    PluginLibrary lib("image_folder");
    FakeConfig cfg;
    configure(lib, cfg, f.root);
    void* self = nullptr;
    CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
    const std::string shown = bad == "a\tb" ? "a\\x09b" : "caf\\xe9";
    const std::string problem = bad == "a\tb" ? "holds the control character U+0009 (byte 1)"
                                              : "is not valid UTF-8 (byte 3)";
    CHECK_MESSAGE(lib.host.last_error.find("image_folder: the class folder '" + (f.root / shown).string() +
                                           "' has a name that " + problem) != std::string::npos,
                  lib.host.last_error);
    CHECK(lib.host.last_error.find("rename the folder to valid UTF-8") != std::string::npos);
  }
}

// Data trial F9: numcls/train/{0,1,2,10,11,.ipynb_checkpoints,__MACOSX} trained a 7-class head
// whose classes began with '.ipynb_checkpoints', so folder `0` got id 1, `1` id 2, ...; __MACOSX
// (left by unzipping a macOS zip) was a class of AppleDouble files.
TEST_CASE("image_folder: hidden folders and __MACOSX at the root are not classes, logged in one info line") {
  const std::filesystem::path root = tp::test::fresh_fixture_dir("if_hidden_folders");
  for (const char* name : {"0", "1", "2", "10", "__MACOSX", ".ipynb_checkpoints", ".git"}) {
    std::filesystem::create_directories(root / name);
    REQUIRE(cv::imwrite((root / name / "a.png").string(), tp::test::gradient_image(8, 8, 3)));
  }
  // Inside a class, a hidden folder is part of the class's tree, as torchvision's os.walk takes it.
  std::filesystem::create_directories(root / "1" / ".thumbs");
  REQUIRE(cv::imwrite((root / "1" / ".thumbs" / "b.png").string(), tp::test::gradient_image(8, 8, 4)));
  const auto cache_dir = root.parent_path() / "if_hidden_folders_index";
  std::filesystem::remove_all(cache_dir);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, root);
  cfg.values["val_root"] = root.string();
  {
    const Dataset train(lib, kId, cfg, "train");
    // Sorted as strings, as torchvision sorts them: "10" before "2".
    CHECK(train.class_names() == std::vector<std::string>{"0", "1", "10", "2"});
    CHECK(train.size() == 5);
    const Dataset val(lib, kId, cfg, "val");  // the same folders: the class check agrees
    CHECK(val.size() == 5);
  }
  CHECK(logged(lib, TP_LOG_INFO, "image_folder (train): 3 hidden folders at the root are not a class ('.git', "
                                 "'.ipynb_checkpoints', '__MACOSX'): folders whose name begins with '.' and __MACOSX "
                                 "are left out, so they shift no class id") == 1);
  CHECK(logged(lib, TP_LOG_WARNING, "") == 1);  // only val_root = root's (data trial F25)
  CHECK(logged(lib, TP_LOG_WARNING, "`val_root` names the training images themselves") == 1);
  // The listing cache holds the same classes, and prepare, which scans, logs the line.
  cfg.values["cache"] = true;
  cfg.values["cache_dir"] = cache_dir.string();
  REQUIRE(lib.dataset_table(kId).prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
  CHECK(logged(lib, TP_LOG_INFO, "image_folder (train): 3 hidden folders") == 2);
  const Dataset cached(lib, kId, cfg, "train");
  CHECK(logged(lib, TP_LOG_INFO, "(listing read from the cache)") == 1);
  CHECK(cached.class_names() == std::vector<std::string>{"0", "1", "10", "2"});
  // Only hidden folders: no class, and the message says why.
  const std::filesystem::path only = tp::test::fresh_fixture_dir("if_only_hidden");
  std::filesystem::create_directories(only / ".ipynb_checkpoints");
  cfg.values["root"] = only.string();
  cfg.values["val_root"] = std::string();
  cfg.values["cache"] = false;
  void* self = nullptr;
  CHECK(lib.dataset_table(kId).create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK_MESSAGE(lib.host.last_error.find("has no class sub-folders (only hidden ones, which are not classes: "
                                         "'.ipynb_checkpoints')") != std::string::npos,
                lib.host.last_error);
}

TEST_CASE("image_folder: a val split that names the training images is warned of (data trial F25)") {
  const Fixture f = write_folder("if_val_is_train", 8, 8);
  PluginLibrary lib("image_folder");
  FakeConfig cfg;
  configure(lib, cfg, f.root);
  // A copy-paste slip: val_root = root, written another way.
  cfg.values["val_root"] = (f.root / "." / "").string();
  const Dataset val(lib, kId, cfg, "val");
  CHECK(logged(lib, TP_LOG_WARNING, "image_folder (val): `val_root` names the training images themselves") == 1);
  // Held-out images: no word.
  const Fixture other = write_folder("if_val_held_out", 8, 8);
  cfg.values["val_root"] = other.root.string();
  const Dataset held_out(lib, kId, cfg, "val");
  CHECK(logged(lib, TP_LOG_WARNING, "names the training images") == 1);
}
