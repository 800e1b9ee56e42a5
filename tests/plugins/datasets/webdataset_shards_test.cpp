// The webdataset plugin's shard side without the plugin: brace patterns, the shard writer (format,
// reproducibility, rollover, what it refuses), the index of a shard (webdataset's grouping, and
// every hostile file refused with its name and byte offset) and the bounded set of open shards.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sample_reader.h"
#include "support/dir_entries.h"
#include "shard_pattern.h"
#include "tar_index.h"
#include "tp/cpp/guard.h"
#include "webdataset_support.h"

namespace fs = std::filesystem;
namespace wds = tp::webdataset;
using namespace tp::test::webdataset;
using tp::test::names_in;

namespace {

std::vector<std::string> expand(const std::string& pattern) { return wds::expand_shard_pattern(pattern, "shards"); }

std::vector<std::string> keys_of(const wds::ShardIndex& index) {
  std::vector<std::string> keys;
  for (const auto& sample : index.samples) keys.push_back(sample.key);
  return keys;
}

}  // namespace

TEST_CASE("webdataset patterns: ranges keep their padding, lists, several braces, as braceexpand") {
  CHECK(expand("d/train-{000000..000002}.tar") ==
        std::vector<std::string>{"d/train-000000.tar", "d/train-000001.tar", "d/train-000002.tar"});
  CHECK(expand("s{8..10}") == std::vector<std::string>{"s8", "s9", "s10"});      // no leading zero: no padding
  CHECK(expand("s{08..10}") == std::vector<std::string>{"s08", "s09", "s10"});   // padded to the longer
  CHECK(expand("s{3..1}") == std::vector<std::string>{"s3", "s2", "s1"});        // down
  CHECK(expand("s{0..6..3}") == std::vector<std::string>{"s0", "s3", "s6"});     // step
  CHECK(expand("{a,b}-{0..1}.tar") == std::vector<std::string>{"a-0.tar", "a-1.tar", "b-0.tar", "b-1.tar"});
  CHECK(expand("x{a,{b,c}d}") == std::vector<std::string>{"xa", "xbd", "xcd"});  // nested
  CHECK(expand("plain.tar") == std::vector<std::string>{"plain.tar"});
  CHECK(expand("{x}.tar") == std::vector<std::string>{"{x}.tar"});               // kept as written
  CHECK(expand("a\\{0..1\\}.tar") == std::vector<std::string>{"a{0..1}.tar"});   // escaped
  CHECK(expand("s{0..99999}").size() == wds::kMaxShards);

  for (const std::string& bad : {std::string(""), std::string("s{0..1"), std::string("s0..1}"),
                                 std::string("s{0..100000}"), std::string("{0..999}{0..999}"),
                                 std::string("s{0..5..0}"), std::string("{a,}"),
                                 std::string("s{0..1234567890123456789}")}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(expand(bad), doctest::Contains(("webdataset: shards = '" + bad + "'").c_str()), tp::cpp::Failure);
  }
  try {
    expand("s{0..100000}");
  } catch (const tp::cpp::Failure& e) {
    CHECK(e.code() == TP_ERR_CONFIG);
    CHECK(std::string(e.what()).find("more than 100000 shard names") != std::string::npos);
  }
}

TEST_CASE("webdataset writer: ustar members key.ext, byte-identical shards, rollover by size, a brace pattern") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_writer");
  const std::string image(3000, 'x');  // 6 blocks of data + 1 of header
  auto write_all = [&](const fs::path& out, uint64_t max_bytes) {
    wds::ShardWriter writer(out.string(), "part", max_bytes);
    for (int i = 0; i < 5; ++i) writer.add("k" + std::to_string(i), {{"jpg", image}, {"cls", std::to_string(i)}});
    return writer.finish();
  };
  // Each sample: (512 + 3072) + (512 + 512) = 4608 bytes; 2 of them and the end blocks: 10240.
  const wds::WrittenShards a = write_all(dir / "a", 10240);
  const wds::WrittenShards b = write_all(dir / "b", 10240);
  REQUIRE(a.paths.size() == 3);
  CHECK(a.samples == 5);
  CHECK(a.pattern == (dir / "a" / "part-{000000..000002}.tar").string());
  CHECK(expand(a.pattern) == a.paths);
  for (std::size_t i = 0; i < a.paths.size(); ++i) {
    CHECK(fs::file_size(a.paths[i]) <= 10240);
    CHECK(file_text(a.paths[i]) == file_text(b.paths[i]));  // reproducible
  }
  CHECK(fs::file_size(a.paths[0]) == 2 * 4608 + 1024);  // no padding to libarchive's 10 KiB records
  const wds::ShardIndex first = wds::index_shard_file(a.paths[0]);
  REQUIRE(first.samples.size() == 2);
  CHECK(first.samples[1].key == "k1");
  CHECK(first.samples[1].offset == 4608);
  CHECK(first.samples[1].extensions == std::vector<std::string>{"jpg", "cls"});
  // No temporary file is left beside the shards.
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir / "a")) files += entry.path().extension() == ".tar";
  CHECK(files == std::size_t(std::distance(fs::directory_iterator(dir / "a"), fs::directory_iterator())));

  // A sample larger than the limit gets a shard of its own; one shard's pattern is its path.
  wds::ShardWriter big((dir / "c").string(), "big", 1000);
  big.add("only", {{"bin", image}});
  const wds::WrittenShards one = big.finish();
  REQUIRE(one.paths.size() == 1);
  CHECK(one.pattern == one.paths[0]);
}

TEST_CASE("webdataset writer: refuses samples the reader would not give back as written") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_writer_refuses");
  wds::ShardWriter writer(dir.string(), "x", 1 << 20);
  writer.add("a/k0", {{"jpg", "1"}});
  for (const auto& [bad_key, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty key"}, {"/abs", "absolute"}, {"../up", "'..'"}, {"a.b", "'.'"}, {"a/k0", "previous"}}) {
    const std::string key = bad_key;  // a copy: CAPTURE's lambda cannot name a structured binding
    CAPTURE(key);
    CHECK_THROWS_WITH_AS(writer.add(key, {{"jpg", "1"}}), doctest::Contains(why.c_str()), tp::cpp::Failure);
  }
  CHECK_THROWS_WITH_AS(writer.add("k1", {{"jpg", "1"}, {"JPG", "2"}}), doctest::Contains("twice"), tp::cpp::Failure);
  CHECK_THROWS_WITH_AS(writer.add("k1", {}), doctest::Contains("no member"), tp::cpp::Failure);
  CHECK_THROWS_AS(wds::ShardWriter(dir.string(), "p", 0), tp::cpp::Failure);
  CHECK_THROWS_AS(wds::ShardWriter(dir.string(), "a/b", 10), tp::cpp::Failure);
}

TEST_CASE("webdataset writer: all or nothing, through a partial directory no one else can reach") {
  // Issue 58, items 16 and 1: shards were written as `<out>/<name>.tmp.<pid>` (opened through any
  // link planted there) and renamed one by one, so a failed or interrupted write left a set that
  // looked complete.
  const fs::path dir = tp::test::fresh_fixture_dir("wds_writer_partial");
  const std::string image(3000, 'x');  // 4608 bytes a sample with its cls: 2 per 10240-byte shard
  const fs::path victim = dir / "victim";
  write_text(victim, "precious");

  SUBCASE("shards appear only at finish; the description last") {
    const fs::path out = dir / "a";
    // The old temporary name, predictable from the pid: a link there was written through.
    fs::create_directories(out);
    fs::create_symlink(victim, out / ("part-000000.tar.tmp." + std::to_string(::getpid())));
    wds::ShardWriter writer(out.string(), "part", 10240);
    for (int i = 0; i < 5; ++i) writer.add("k" + std::to_string(i), {{"jpg", image}, {"cls", "1"}});
    CHECK(writer.completed_shards() == 2);
    const std::string partial = fs::path(writer.partial_dir()).filename().string();
    CHECK(partial.rfind(".part.", 0) == 0);
    CHECK(partial.size() == std::string(".part.").size() + 12 + std::string(".partial-").size() +
                                std::to_string(::getpid()).size());
    CHECK(partial.ends_with(".partial-" + std::to_string(::getpid())));
    CHECK((fs::status(writer.partial_dir()).permissions() & fs::perms::all) == fs::perms::owner_all);
    CHECK(names_in(out) == std::vector<std::string>{partial, "part-000000.tar.tmp." + std::to_string(::getpid())});
    const wds::WrittenShards written = writer.finish("part-shards.json", [](const wds::WrittenShards& w) {
      return "{\"shards\": " + std::to_string(w.paths.size()) + "}";
    });
    CHECK(written.paths.size() == 3);
    CHECK(names_in(out) == std::vector<std::string>{"part-000000.tar", "part-000000.tar.tmp." + std::to_string(::getpid()),
                                                    "part-000001.tar", "part-000002.tar", "part-shards.json"});
    CHECK(file_text(out / "part-shards.json") == "{\"shards\": 3}");
    CHECK(file_text(victim) == "precious");
    CHECK(wds::index_shard_file(written.paths[2]).samples.size() == 1);
  }
  SUBCASE("a writer that stops before finish leaves nothing: no shard, no partial directory") {
    const fs::path out = dir / "b";
    {
      wds::ShardWriter writer(out.string(), "part", 10240);
      for (int i = 0; i < 5; ++i) writer.add("k" + std::to_string(i), {{"jpg", image}, {"cls", "1"}});
      CHECK(writer.completed_shards() == 2);
    }
    CHECK(names_in(out).empty());
  }
  SUBCASE("a link planted at a shard's name during the write is neither written through nor replaced") {
    const fs::path out = dir / "c";
    wds::ShardWriter writer(out.string(), "part", 10240);
    for (int i = 0; i < 5; ++i) writer.add("k" + std::to_string(i), {{"jpg", image}, {"cls", "1"}});
    fs::create_symlink(victim, out / "part-000001.tar");
    const std::string refusal = "cannot move 'part-000001.tar' into '" + out.string() + "': File exists";
    CHECK_THROWS_WITH_AS(writer.finish(), doctest::Contains(refusal.c_str()), tp::cpp::Failure);
    CHECK(file_text(victim) == "precious");
    CHECK(fs::is_symlink(out / "part-000001.tar"));
    CHECK_FALSE(fs::exists(out / "part-000000.tar"));  // moved, then taken back
  }
  CHECK(file_text(victim) == "precious");
}

TEST_CASE("webdataset writer: partial directories of writers that are gone are swept, others kept") {
  const fs::path out = tp::test::fresh_fixture_dir("wds_writer_sweep");
  const std::string gone = ".part.AbCdEfGhIjKl.partial-999999999";        // no such pid
  const std::string alive = ".part.AbCdEfGhIjKl.partial-" + std::to_string(::getpid());
  const std::string other = ".other.AbCdEfGhIjKl.partial-999999999";      // another prefix's
  const std::string unlike = ".part.short.partial-999999999";             // not a writer's name
  for (const std::string& name : {gone, alive, other, unlike}) {
    fs::create_directories(out / name);
    write_text(out / name / "part-000000.tar", "x");
  }
  wds::ShardWriter writer(out.string(), "part", 1 << 20);
  CHECK(writer.swept() == std::vector<std::string>{(out / gone).string()});
  CHECK_FALSE(fs::exists(out / gone));
  for (const std::string& name : {alive, other, unlike}) CHECK(fs::exists(out / name / "part-000000.tar"));
}

TEST_CASE("webdataset index: webdataset's grouping of members into samples") {
  const fs::path shard = tp::test::fresh_fixture_dir("wds_grouping") / "g.tar";
  write_raw_tar(shard, {{"d/", ""},                                          // a directory: skipped
                        {"__meta__", "m"}, {"x/__key__", "m"},               // meta files: skipped
                        {"d/000001.JPG", "i"}, {"d/000001.cls", "1"},         // extension lower-cased
                        {"d/000001.seg.png", "s"},                            // extension after the first dot
                        {"d/000001.jpg", "j"},                                // a repeated extension: new sample
                        {"noextension", "n"}, {".hidden.jpg", "h"}, {"dot.", "d"},  // no key: skipped
                        {"d/000002.jpg", "2"}, {"000002.jpg", "3"}});        // another directory, another key
  const wds::ShardIndex index = wds::index_shard_file(shard.string());
  CHECK(keys_of(index) == std::vector<std::string>{"d/000001", "d/000001", "d/000002", "000002"});
  CHECK(index.samples[0].extensions == std::vector<std::string>{"jpg", "cls", "seg.png"});
  CHECK(index.samples[1].extensions == std::vector<std::string>{"jpg"});
  CHECK(index.samples[0].offset == 5 * 512);  // after the directory (1 block) and the two meta files (2 each)
  for (std::size_t i = 1; i < index.samples.size(); ++i) CHECK(index.samples[i].offset > index.samples[i - 1].offset);
  CHECK(index.file_size == fs::file_size(shard));
}

TEST_CASE("webdataset index: hostile shards are refused naming the file, the byte offset and what to do") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_hostile_index");
  const fs::path good = dir / "good.tar";
  write_raw_tar(good, {{"a.jpg", std::string(3000, 'x')}, {"a.cls", "1"}, {"b.jpg", "y"}});
  auto refused = [](const fs::path& path, const std::string& what) {
    CAPTURE(what);
    try {
      wds::index_shard_file(path.string());
      FAIL("indexed " << path);
    } catch (const tp::cpp::Failure& e) {
      CHECK(e.code() == TP_ERR_IO);
      CHECK_MESSAGE(std::string(e.what()).find("'" + path.string() + "'") != std::string::npos, std::string(e.what()));
      CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, std::string(e.what()));
    }
  };
  SUBCASE("cut in a member's data") {
    const fs::path cut = dir / "cut.tar";
    write_text(cut, file_text(good).substr(0, 2000));
    refused(cut, "is truncated: the member 'a.jpg' whose header is at byte 0 declares 3000 bytes");
  }
  SUBCASE("a member that claims more bytes than the shard holds") {
    const fs::path big = dir / "big.tar";
    fs::copy_file(good, big);
    patch_member_size(big, 3584, uint64_t{1} << 33);  // a.cls, after a.jpg's 512 + 3072 bytes
    refused(big, "the member 'a.cls' whose header is at byte 3584 declares 8589934592 bytes");
  }
  SUBCASE("not a tar") {
    const fs::path text = dir / "notes.tar";
    write_text(text, std::string(2000, 'n'));
    refused(text, "is not a tar archive");
    refused(text, "at byte 0");
  }
  SUBCASE("a damaged header") {
    const fs::path damaged = dir / "damaged.tar";
    std::string bytes = file_text(good);
    bytes.replace(3584 + 20, 4, "XXXX");  // a.cls's name: its checksum no longer matches
    write_text(damaged, bytes);
    refused(damaged, "cannot read the tar header at byte 3584");
  }
  SUBCASE("a directory named like a shard") {
    fs::create_directories(dir / "dir.tar");
    refused(dir / "dir.tar", "not a regular file");
  }
  SUBCASE("empty shards hold no sample and are no error") {
    write_text(dir / "zero.tar", "");
    write_text(dir / "end.tar", std::string(1024, '\0'));
    CHECK(wds::index_shard_file((dir / "zero.tar").string()).samples.empty());
    CHECK(wds::index_shard_file((dir / "end.tar").string()).samples.empty());
  }
}

TEST_CASE("webdataset shard files: concurrent reads through a bounded set of descriptors") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_files");
  std::vector<std::string> paths;
  for (int s = 0; s < 5; ++s) {
    paths.push_back((dir / ("s" + std::to_string(s))).string());
    write_text(paths.back(), std::string(4096, static_cast<char>('a' + s)));
  }
  const wds::ShardFiles files(paths, 2);
  std::atomic<int> wrong{0};
  std::vector<std::thread> workers;
  workers.reserve(4);
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::size_t s = static_cast<std::size_t>((i * 7 + t) % 5);
        const std::vector<unsigned char> bytes = files.read(s, 100, 110);
        if (bytes != std::vector<unsigned char>(10, static_cast<unsigned char>('a' + s))) ++wrong;
      }
    });
  for (auto& w : workers) w.join();
  CHECK(wrong == 0);
  CHECK(files.open_count() <= 2);
  CHECK_THROWS_WITH_AS(files.read(0, 4000, 5000), doctest::Contains("ends at byte 4096"), tp::cpp::Failure);
  const wds::ShardFiles missing({(dir / "gone.tar").string()});
  CHECK_THROWS_WITH_AS(missing.read(0, 0, 1), doctest::Contains("gone.tar"), tp::cpp::Failure);
}
