// `host shards write` as a user runs it (issue 58): listings that name files the image datasets
// refuse (a FIFO, /dev/zero through a link, a sparse file past the size cap, a decompression bomb,
// an empty file, a web page named .jpg) fail within seconds naming the file, with nothing
// written; a config with only [data.train] works; the samples are shuffled across the shards with
// a recorded seed (the same seed, the same bytes; --keep-order the listing's order); a write that
// fails half way leaves no shard and no partial directory; links planted at the shards' names are
// refused and never written through; a killed writer's partial directory is swept; a link loop in
// a class folder is not followed; argument errors are the host's exit-2 messages; the webdataset
// plugin lends the written classes' names. Each image is a
// few bytes that begin and end like a JPEG (the command copies files, it never decodes them), so
// each run takes a fraction of a second.
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "fixtures.h"
#include "integration/host_runner.h"

namespace {

namespace fs = std::filesystem;
using tp::test::contains;
using tp::test::HostRun;

/// `host <args>`, killed after 20 s (a hang fails the test instead of stalling the suite), with
/// the seconds it took.
HostRun run_host_timed(const std::string& args, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  HostRun run = tp::test::run_shell("timeout -s KILL 20 '" + std::string(tp::test::build_dir()) + "/bin/host' " + args);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A config with [data.train] alone: image_folder over `root`, optionally through a CSV listing;
/// with `run_tables`, also the [model] and [loss] a run needs (which the command ignores).
fs::path data_only_config(const fs::path& dir, const fs::path& root, const std::string& csv = "",
                          bool run_tables = false) {
  const fs::path config = dir / (run_tables ? "run.toml" : "data.toml");
  std::ofstream(config) << "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"" << root.string()
                        << "\"\n" << (csv.empty() ? "" : "csv = \"" + csv + "\"\n")
                        << (run_tables ? "[model]\ncomponent = \"org.torchhost.small_cnn\"\n"
                                         "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n"
                                       : "");
  return config;
}

/// Every name in `dir`, sorted (hidden ones included); none when it does not exist.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// The members of a tar file, (name, bytes) in order.
std::vector<std::pair<std::string, std::string>> tar_members(const fs::path& path) {
  std::vector<std::pair<std::string, std::string>> members;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  REQUIRE(archive_read_open_filename(a, path.c_str(), 10240) == ARCHIVE_OK);
  struct archive_entry* entry = nullptr;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    std::string data(static_cast<std::size_t>(archive_entry_size(entry)), '\0');
    if (!data.empty()) REQUIRE(archive_read_data(a, data.data(), data.size()) == static_cast<la_ssize_t>(data.size()));
    members.emplace_back(archive_entry_pathname(entry), std::move(data));
  }
  archive_read_free(a);
  return members;
}

/// Per shard of `<out>/<prefix>-*.tar` (in order), the `cls` labels of its samples.
std::vector<std::vector<std::string>> labels_by_shard(const fs::path& out, const std::string& prefix = "train") {
  std::vector<std::vector<std::string>> shards;
  for (const std::string& name : names_in(out)) {
    if (!name.starts_with(prefix + "-") || !name.ends_with(".tar")) continue;
    shards.emplace_back();
    for (const auto& [member, data] : tar_members(out / name))
      if (member.ends_with(".cls")) shards.back().push_back(data);
  }
  return shards;
}

/// The `source` of every sample's json member, in written order.
std::vector<std::string> sources_in_order(const fs::path& out) {
  std::vector<std::string> sources;
  for (const std::string& name : names_in(out)) {
    if (!name.ends_with(".tar")) continue;
    for (const auto& [member, data] : tar_members(out / name)) {
      const std::size_t at = data.find("\"source\":\"");
      if (member.ends_with(".json") && at != std::string::npos)
        sources.push_back(data.substr(at + 10, data.find('"', at + 10) - at - 10));
    }
  }
  return sources;
}

/// A few bytes that begin and end like a JPEG (SOI, then `text`, then EOI): the command checks a
/// file's signature and a JPEG's end, and never decodes it.
std::string jpeg_like(const std::string& text) { return "\xFF\xD8\xFF" + text + "\xFF\xD9"; }

/// <root>/c0 and <root>/c1, `per_class` small files each (a.jpg ... bytes that name the file).
void write_two_classes(const fs::path& root, int per_class) {
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < per_class; ++i) {
      const std::string name = "c" + std::to_string(c) + "/" + std::string(1, static_cast<char>('a' + i)) + ".jpg";
      write_file(root / name, jpeg_like("image " + name));
    }
}

}  // namespace

TEST_CASE("host shards write: files the image datasets refuse are refused naming them, at once, nothing written") {
  // Issue 58, item 5: a FIFO in the listing hung the command for good, /dev/zero grew its memory
  // until the OOM killer; now each file is read as the image datasets read it.
  const fs::path dir = tp::test::fresh_dir("shards_write_refusals");
  const fs::path root = dir / "images";
  write_file(root / "a" / "1.jpg", jpeg_like("one"));
  write_file(root / "a" / "2.jpg", jpeg_like("two"));
  // The ops trial (finding 4): an empty file and a web page under an image's name were copied,
  // and training from the shards failed on them mid-epoch.
  write_file(root / "empty.png", "");
  write_file(root / "page.jpg", "<html>\n<title>404 Not Found</title>\n</html>\n");
  REQUIRE(::mkfifo((root / "fifo.jpg").c_str(), 0644) == 0);
  fs::create_symlink("/dev/zero", root / "zero.jpg");
  write_file(root / "big.jpg", "");
  REQUIRE(::truncate((root / "big.jpg").c_str(), (off_t{1} << 30) + 1) == 0);  // sparse: no disk
  // A PNG whose header declares 30000 x 30000 pixels (the image datasets' max_image_pixels).
  std::string bomb("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x75\x30\0\0\x75\x30\x08\x02\0\0\0", 29);
  write_file(root / "bomb.png", bomb);
  // Data trial F5: a macOS AppleDouble file (._name beside each image copied from a Mac).
  write_file(root / "._mac.jpg", std::string("\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ", 24));
  struct Case {
    std::string file, says;
  };
  for (const Case& refused : {Case{"fifo.jpg", "' is a FIFO, not a regular file"},
                              Case{"zero.jpg", "' is a character device, not a regular file"},
                              Case{"big.jpg", "' holds 1073741825 bytes, more than the 1073741824"},
                              Case{"bomb.png", "' declares 30000 x 30000 = 900000000 pixels, more than max_image_pixels"},
                              Case{"empty.png", "' is empty (0 bytes), not an image; fix or remove the file"},
                              Case{"._mac.jpg", "' is not an image: it is a macOS AppleDouble file (its first "
                                                "bytes are 00 05 16 07), the metadata macOS writes"},
                              Case{"page.jpg", "' is not an image: it begins with 3C 68 74 6D 6C 3E 0A 3C, the "
                                               "signature of no image format"}}) {
    CAPTURE(refused.file);
    const fs::path csv = dir / (refused.file + ".csv");
    std::ofstream(csv) << "a/1.jpg,0\n" << refused.file << ",1\na/2.jpg,0\n";
    const fs::path out = dir / ("out_" + refused.file);
    double seconds = 0;
    // A run's config (the command ignores its [model] and [loss]), as the probe used.
    const HostRun run = run_host_timed("shards write --config '" +
                                           data_only_config(dir, root, csv.string(), true).string() + "' --out '" +
                                           out.string() + "'",
                                       &seconds);
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK(contains(run.output, "host: error: host shards write: '" + (root / refused.file).string() + refused.says));
    CHECK(contains(run.output, "Nothing was written to '" + out.string() + "'"));
    CHECK(seconds < 10);  // a fraction of a second (the host's start-up): nothing waits or fills memory
    CHECK(names_in(out).empty());
  }
}

TEST_CASE("host shards write: a data-only config; samples shuffled across shards with a recorded seed") {
  // Issue 58, item 15: shards held the listing's order (one or two classes each), and the command
  // demanded [model] and [loss], which it never reads.
  const fs::path dir = tp::test::fresh_dir("shards_write_shuffle");
  const fs::path root = dir / "images";
  write_two_classes(root, 12);
  const std::string config = data_only_config(dir, root).string();
  // 4 samples a shard: each is 3 members of one 512-byte block and one header each.
  const std::string common = "shards write --config '" + config + "' --shard-size 13312 --out ";
  auto write = [&](const std::string& name, const std::string& extra) {
    double seconds = 0;
    const HostRun run = run_host_timed(common + "'" + (dir / name).string() + "' " + extra, &seconds);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    return run.output;
  };
  // A killed writer's partial directory (its pid gone) is swept by the next write of its prefix.
  const fs::path stale = dir / "seeded" / ".train.AbCdEfGhIjKl.partial-999999999";
  write_file(stale / "train-000000.tar", "half a shard");

  const std::string seeded = write("seeded", "");
  CHECK(contains(seeded, "24 samples of data.train (split train, 2 classes, 0 MiB of images) in 6 shards, shuffled "
                         "with seed 42 (run.seed; --seed N to choose)"));
  CHECK(contains(seeded, "removed '" + stale.string() + "', the partial directory of a write that was stopped"));
  CHECK(contains(seeded, "shards = \"" + (dir / "seeded" / "train-{000000..000005}.tar").string() + "\""));
  const std::string description = tp::test::read_text(dir / "seeded" / "train-shards.json");
  CHECK(contains(description, "\"pattern\": \"train-{000000..000005}.tar\""));
  CHECK(contains(description, "\"order\": {\n    \"shuffled\": true,\n    \"seed\": 42\n  }"));
  CHECK(contains(description, "\"classes\": [\n    \"c0\",\n    \"c1\"\n  ]"));
  std::vector<std::string> expected_names;
  for (int i = 0; i < 6; ++i) expected_names.push_back("train-00000" + std::to_string(i) + ".tar");
  expected_names.push_back("train-shards.json");
  CHECK(names_in(dir / "seeded") == expected_names);  // the stale partial gone, no partial of this write left
  const std::vector<std::vector<std::string>> shards = labels_by_shard(dir / "seeded");
  REQUIRE(shards.size() == 6);
  std::size_t mixed = 0;
  for (const auto& labels : shards) mixed += std::set<std::string>(labels.begin(), labels.end()).size() == 2;
  CHECK(mixed >= 4);  // listing order: none (each shard of 4 samples holds one class)
  const std::vector<std::string> order = sources_in_order(dir / "seeded");
  CHECK(std::set<std::string>(order.begin(), order.end()).size() == 24);  // every file once

  // The same seed gives the same bytes; another seed another order; --keep-order the listing's.
  write("again", "");
  for (int i = 0; i < 6; ++i) {
    const std::string name = "train-00000" + std::to_string(i) + ".tar";
    CHECK(tp::test::read_text(dir / "again" / name) == tp::test::read_text(dir / "seeded" / name));
  }
  const std::string other = write("other", "--seed 7");
  CHECK(contains(other, "shuffled with seed 7 (--seed)"));
  CHECK(sources_in_order(dir / "other") != order);
  const std::string kept = write("kept", "--keep-order");
  CHECK(contains(kept, "in the listing's order (--keep-order)"));
  CHECK(contains(tp::test::read_text(dir / "kept" / "train-shards.json"), "\"order\": {\n    \"shuffled\": false\n  }"));
  const std::vector<std::vector<std::string>> listed = labels_by_shard(dir / "kept");
  for (std::size_t s = 0; s < listed.size(); ++s)
    CHECK(listed[s] == std::vector<std::string>(4, s < 3 ? "0" : "1"));
}

TEST_CASE("host shards write: all or nothing; links at the shards' names refused, never written through") {
  // Issue 58, items 16 and 1: a write that failed half way left the shards it had finished in
  // place (a set that looked complete, and temporaries no one swept); shard temporaries were
  // opened by a predictable name through any link planted there.
  const fs::path dir = tp::test::fresh_dir("shards_write_all_or_nothing");
  const fs::path root = dir / "images";
  write_two_classes(root, 4);
  fs::create_directories(root / "c1" / "e.jpg");  // the 5th of 8 in the listing's order: a directory
  std::ofstream(dir / "list.csv") << "c0/a.jpg,0\nc0/b.jpg,0\nc0/c.jpg,0\nc0/d.jpg,0\nc1/e.jpg,1\nc1/a.jpg,1\n"
                                      "c1/b.jpg,1\nc1/c.jpg,1\n";
  const std::string config = data_only_config(dir, root, (dir / "list.csv").string()).string();
  const fs::path out = dir / "out";
  double seconds = 0;
  // 1 sample a shard: the 5th sample fails after three shards were completed (the 4th is open).
  const HostRun failed = run_host_timed("shards write --keep-order --shard-size 4096 --config '" + config +
                                            "' --out '" + out.string() + "'",
                                        &seconds);
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK(contains(failed.output, "'" + (root / "c1" / "e.jpg").string() + "' is a directory, not a regular file"));
  CHECK(contains(failed.output, "(at sample 4 of 8). Nothing was written to '" + out.string() +
                                    "': the 3 shards this write had completed (train-000000.tar to "
                                    "train-000002.tar) were removed with its partial directory"));
  CHECK(names_in(out).empty());  // no shard, no partial directory, no temporary

  // Links planted at the shards' final names, pointing at a file the user can write: refused
  // before anything is read; the file and the links stay as they were.
  const fs::path victim = dir / "victim.txt";
  write_file(victim, "precious");
  const fs::path planted = dir / "planted";
  fs::create_directories(planted);
  fs::create_symlink(victim, planted / "train-000000.tar");
  fs::create_symlink(victim, planted / "train-000001.tar");
  const HostRun refused = run_host_timed("shards write --shard-size 7168 --config '" +
                                             data_only_config(dir, root).string() + "' --out '" + planted.string() + "'",
                                         &seconds);
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "already holds a symbolic link named like a shard (train-000000.tar). Nothing was "
                                 "written"));
  CHECK(tp::test::read_text(victim) == "precious");
  CHECK(fs::is_symlink(planted / "train-000000.tar"));
  CHECK(names_in(planted) == std::vector<std::string>{"train-000000.tar", "train-000001.tar"});
}

TEST_CASE("host shards write: a link loop in a class folder is named and not followed; a link to itself skipped") {
  // The ops trial (finding 5): `c0/loop/up -> ..` ended the command with "unexpected error:
  // filesystem error: status: Too many levels of symbolic links [<a 1 KB path>]", and so did
  // `c1/self.jpg -> self.jpg`.
  const fs::path dir = tp::test::fresh_dir("shards_write_loops");
  const fs::path root = dir / "images";
  write_two_classes(root, 2);
  fs::create_directories(root / "c0" / "loop");
  fs::create_directory_symlink("..", root / "c0" / "loop" / "up");
  fs::create_symlink("self.jpg", root / "c1" / "self.jpg");
  double seconds = 0;
  const HostRun run = run_host_timed("shards write --config '" + data_only_config(dir, root).string() + "' --out '" +
                                         (dir / "out").string() + "'",
                                     &seconds);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.output, "host shards write: 'c0/loop/up' in data.train's folders links back to a folder it is "
                             "inside (a link loop): not followed"));
  CHECK(contains(run.output, "4 samples of data.train"));  // each file once; the link to itself left out
  CHECK_FALSE(contains(run.output, "unexpected error"));
  std::vector<std::string> sources = sources_in_order(dir / "out");
  std::sort(sources.begin(), sources.end());
  CHECK(sources == std::vector<std::string>{"c0/a.jpg", "c0/b.jpg", "c1/a.jpg", "c1/b.jpg"});
}

TEST_CASE("host shards write: argument errors are the host's configuration errors, not 'unexpected error'") {
  const fs::path dir = tp::test::fresh_dir("shards_write_arguments");
  const fs::path root = dir / "images";
  write_two_classes(root, 1);
  const std::string config = data_only_config(dir, root).string();
  write_file(dir / "a_file", "x");
  struct Case {
    std::string args, says;
    int exit_code;
  };
  for (const Case& bad : {
           Case{"--shard-size 1e30 --out '" + (dir / "o").string() + "'", "--shard-size 1e30 is not a shard size", 2},
           Case{"--out '" + (dir / "a_file").string() + "'", "exists and is not a directory", 2},
           Case{"--out '" + (dir / "a_file" / "sub").string() + "'", "cannot create the directory", 2},
           Case{"--seed abc --out '" + (dir / "o").string() + "'", "--seed takes an integer from 0 to 2^64 - 1", 2},
           Case{"--split val --out '" + (dir / "o").string() + "'", "the val split needs `val_root`", 2},
           // The plugin's own key reader (split_listing.h): what the plugin refuses, shards write
           // refuses (its own mapping wrote the training split with val_split = -0.5).
           Case{"--set data.train.val_split=-0.5 --out '" + (dir / "o").string() + "'",
                "image_folder: val_split = -0.5 is outside [0, 1]", 2},
           Case{"--set data.train.root='\"" + (dir / "nowhere").string() + "\"' --out '" + (dir / "o").string() + "'",
                "is not a directory", 2}}) {
    CAPTURE(bad.args);
    double seconds = 0;
    const HostRun run = run_host_timed("shards write --config '" + config + "' " + bad.args, &seconds);
    INFO(run.output);
    CHECK(run.exit_code == bad.exit_code);
    CHECK(contains(run.output, bad.says));
    CHECK_FALSE(contains(run.output, "unexpected error"));
  }
  CHECK_FALSE(fs::exists(dir / "o"));
}

// Data trial F4: a folder's .bmp files went into the shards as .bmp members the webdataset
// default did not read. The defaults now agree; an ending the user added to `extensions` beyond
// them is stored too, and the command prints the `image_extensions` line the reader needs.
TEST_CASE("host shards write: prints the image_extensions the reader needs for an ending beyond its default") {
  const fs::path dir = tp::test::fresh_dir("shards_write_endings");
  const fs::path root = dir / "images";
  write_two_classes(root, 2);
  write_file(root / "c1" / "z.jpe", jpeg_like("a JPEG named .jpe"));
  const fs::path config = dir / "endings.toml";
  std::ofstream(config) << "[data.train]\ncomponent = \"org.torchhost.image_folder\"\nroot = \"" << root.string()
                        << "\"\nextensions = [\".jpg\", \".jpe\"]\n";
  double seconds = 0;
  HostRun run = run_host_timed("shards write --config '" + config.string() + "' --out '" + (dir / "out").string() + "'",
                               &seconds);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "image_extensions = [\"jpg\", \"jpeg\", \"png\", \"ppm\", \"bmp\", \"pgm\", \"tif\", "
                             "\"tiff\", \"webp\", \"jpe\"]  # these shards hold .jpe images, which the webdataset "
                             "default leaves out"));
  // Endings the reader's default takes: only the shards line.
  std::filesystem::remove(root / "c1" / "z.jpe");
  run = run_host_timed("shards write --config '" + data_only_config(dir, root).string() + "' --out '" +
                           (dir / "out_default").string() + "'",
                       &seconds);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "shards = \""));
  CHECK_FALSE(contains(run.output, "image_extensions ="));
}

// Security trial F13: `shards = "%s"` was printed raw, so a --out holding '"' or '\' gave a line
// that did not parse pasted into a config (or, with a crafted name, added keys).
TEST_CASE("host shards write: the shards line to paste is TOML, its quotes and backslashes escaped") {
  const fs::path dir = tp::test::fresh_dir("shards_write_quoted");
  const fs::path root = dir / "images";
  write_two_classes(root, 1);
  const fs::path out = dir / "sh\"ar ds\\x";
  double seconds = 0;
  const HostRun run = run_host_timed(
      "shards write --config '" + data_only_config(dir, root).string() + "' --out '" + out.string() + "'", &seconds);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::string escaped;
  for (const char c : (out / "train-000000.tar").string()) escaped += (c == '"' || c == '\\' ? "\\" : "") + std::string(1, c);
  CHECK(contains(run.output, "shards = \"" + escaped + "\"\n"));
}

TEST_CASE("host shards write: a file name that is not UTF-8 is written, its bytes U+FFFD in the json's source") {
  // Data trial F22: the JSON library's bare exception ("invalid UTF-8 byte") named no file.
  const fs::path dir = tp::test::fresh_dir("shards_write_latin1");
  const fs::path root = dir / "images";
  write_two_classes(root, 1);
  write_file(root / "c1" / "r\xe9sum\xe9.jpg", jpeg_like("a Latin-1 name"));
  double seconds = 0;
  const HostRun run = run_host_timed("shards write --config '" + data_only_config(dir, root).string() + "' --out '" +
                                         (dir / "out").string() + "' --keep-order",
                                     &seconds);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  bool found = false;
  for (const auto& [member, data] : tar_members(dir / "out" / "train-000000.tar"))
    found = found || (member.ends_with(".json") && contains(data, "r\xef\xbf\xbdsum\xef\xbf\xbd.jpg"));
  CHECK(found);
}

// Data trial F12: shards written from an image folder kept the classes only in
// train-shards.json, which the webdataset plugin did not read: predict wrote no `.class` column
// and host export no torchhost.classes after the recommended move to shards.
TEST_CASE("host shards write: the webdataset plugin lends the written classes' names; class_names for other shards") {
  const fs::path dir = tp::test::fresh_dir("shards_write_classes");
  const fs::path root = dir / "images";
  for (const char* name : {"tabby cat/a.jpg", "dog/b.jpg", "dog/c.jpg", "emu/d.jpg"})
    write_file(root / name, jpeg_like(name));
  const fs::path out = dir / "shards";
  const HostRun run = tp::test::run_host("shards write --config '" + data_only_config(dir, root).string() +
                                         "' --out '" + out.string() + "' --keep-order");
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  REQUIRE(fs::exists(out / "train-shards.json"));
  tp::test::PluginLibrary lib("webdataset");
  tp::test::FakeConfig cfg;
  REQUIRE(lib.entry().descriptor_count() == 1);
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["shards"] = (out / "train-000000.tar").string();
  cfg.values["cache"] = false;
  {
    const tp::test::Dataset ds(lib, "org.torchhost.webdataset", cfg, "train");
    CHECK(ds.size() == 4);
    CHECK(ds.class_names() == std::vector<std::string>{"dog", "emu", "tabby cat"});
  }
  bool logged = false;
  for (const std::string& line : lib.host.logs)
    logged = logged || line.find("3 class names from '" + (out / "train-shards.json").string() + "'") != std::string::npos;
  CHECK(logged);
  // class_names gives them for shards made elsewhere; beside a description, its count must agree.
  cfg.values["class_names"] = std::vector<std::string>{"a", "b"};
  void* self = nullptr;
  CHECK(lib.dataset_table("org.torchhost.webdataset").create(&lib.host.host, &cfg.view, "train", &self) == TP_ERR_CONFIG);
  CHECK_MESSAGE(contains(lib.host.last_error, "webdataset: class_names names 2 classes, but '" +
                                                  (out / "train-shards.json").string() +
                                                  "', written with the shards of `shards`, names 3"),
                lib.host.last_error);
  fs::remove(out / "train-shards.json");
  {
    const tp::test::Dataset ds(lib, "org.torchhost.webdataset", cfg, "train");  // no description: no names but these
    CHECK(ds.class_names() == std::vector<std::string>{"a", "b"});
    // "tabby cat/a.jpg" (sample 3, --keep-order) is label 2, past the two names: it fails, naming the key.
    tp::test::Sample s;
    const tp_worker_ctx_t ctx = tp::test::worker_ctx(0);
    CHECK(ds.try_get(3, &ctx, s) != TP_OK);
    CHECK_MESSAGE(contains(lib.host.last_error, "has the label 2, but `class_names` names 2 classes (ids 0 to 1)"),
                  lib.host.last_error);
  }
  cfg.values["class_names"] = std::vector<std::string>{};
  const tp::test::Dataset unnamed(lib, "org.torchhost.webdataset", cfg, "train");
  CHECK(unnamed.class_names().empty());
}
