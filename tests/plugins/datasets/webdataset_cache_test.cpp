// webdataset's shard index cache: the parser that reads a cache file back as untrusted input
// (everything a scan could not have written is refused), and through the C ABI: prepare writes
// one index per shard, create reads them while each shard is unchanged, and ignores a stale,
// garbled or planted one.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "index_cache.h"
#include "shard_pattern.h"
#include "support/other_user.h"
#include "support/scoped_env.h"
#include "webdataset_support.h"

namespace fs = std::filesystem;
namespace wds = tp::webdataset;
using namespace tp::test::webdataset;

namespace {

const std::string kCachedShard = "/data/shards/train-000000.tar";

wds::ShardIndex three_samples() {
  wds::ShardIndex index;
  index.file_size = 8192;
  index.mtime_ns = 1700000000123456789;
  index.samples = {{"a/k0", 0, {"jpg", "cls"}}, {"a/k0", 1024, {"jpg"}}, {"odd key,%\n\tx", 2048, {"seg.png", "json"}}};
  return index;
}

std::vector<fs::path> index_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::exists(dir))
    for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// Five samples (16 x 16 PNGs, cls labels) in shards of about two in `dir`; their pattern.
std::string write_shards(const fs::path& dir) {
  wds::ShardWriter writer(dir.string(), "c", 7000);  // a sample takes about 2.5 KB
  for (int i = 0; i < 5; ++i)
    writer.add(std::to_string(100 + i), {{"png", encoded_image(16, 16, i)}, {"cls", std::to_string(i % 3)}});
  const wds::WrittenShards written = writer.finish();
  REQUIRE(written.paths.size() >= 2);
  return written.pattern;
}

}  // namespace

TEST_CASE("webdataset cache: a written index reads back equal, any key included") {
  const wds::ShardIndex index = three_samples();
  const std::string text = wds::format_index_cache(kCachedShard, index);
  const auto back = wds::parse_index_cache(text, kCachedShard, index.file_size, index.mtime_ns);
  REQUIRE(back.has_value());
  REQUIRE(back->samples.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back->samples[i].key == index.samples[i].key);
    CHECK(back->samples[i].offset == index.samples[i].offset);
    CHECK(back->samples[i].extensions == index.samples[i].extensions);
  }
  // Stale: another shard, size or time.
  CHECK_FALSE(wds::parse_index_cache(text, "/data/shards/train-000001.tar", 8192, index.mtime_ns));
  CHECK_FALSE(wds::parse_index_cache(text, kCachedShard, 8704, index.mtime_ns));
  CHECK_FALSE(wds::parse_index_cache(text, kCachedShard, 8192, index.mtime_ns + 1));
}

TEST_CASE("webdataset cache: everything a scan could not have written is refused") {
  const std::string text = wds::format_index_cache(kCachedShard, three_samples());
  const int64_t mtime = three_samples().mtime_ns;
  for (const auto& [from, replacement] : std::vector<std::pair<std::string, std::string>>{
           {"index 1\n", "index 2\n"},                          // another format
           {"\n3\n", "\n4\n"},                                  // more samples than lines
           {"\n3\n", "\n17\n"},                                 // more than 8192 / 512 headers
           {"\n3\n", "\n999999999999999999\n"},                 // absurd
           {"\n3\n", "\n-3\n"}, {"\n3\n", "\n3x\n"},            // not a count
           {"\n1024 jpg a/k0", "\n1000 jpg a/k0"},              // not on a header boundary
           {"\n1024 jpg a/k0", "\n0 jpg a/k0"},                 // not increasing
           {"\n2048 seg.png", "\n8192 seg.png"},                // past the end of the shard
           {"\n2048 seg.png", "\n7680 seg.png"},                // ... its header would end at the end: fine?
           {"0 jpg,cls a/k0", "0 JPG,cls a/k0"},                // not lower case
           {"0 jpg,cls a/k0", "0 jpg,jpg a/k0"},                // repeated extension
           {"0 jpg,cls a/k0", "0 jpg, a/k0"},                   // empty extension
           {"0 jpg,cls a/k0", "0 jpg,c/s a/k0"},                // '/' in an extension
           {"0 jpg,cls a/k0", "0 jpg,cls a/k0.x"},              // '.' in the key's basename
           {"0 jpg,cls a/k0", "0 jpg,cls a/"},                  // empty basename
           {"0 jpg,cls a/k0", "0 jpg,cls a%2"},                 // cut escape
           {"0 jpg,cls a/k0", "0 jpg,cls a%00"},                // NUL
           {"0 jpg,cls a/k0", "0 jpg,cls a k0"},                // a fourth field
           {"1024 jpg a/k0", "1024 png a/k0"},                  // same key, no repeated extension
       }) {
    const std::string to = replacement;  // a copy: CAPTURE's lambda cannot name a structured binding
    CAPTURE(to);
    std::string edited = text;
    REQUIRE(edited.find(from) != std::string::npos);
    edited.replace(edited.find(from), from.size(), to);
    const bool fine = to == "\n7680 seg.png";  // the last header starts 512 bytes before the end
    CHECK(wds::parse_index_cache(edited, kCachedShard, 8192, mtime).has_value() == fine);
  }
  CHECK_FALSE(wds::parse_index_cache(text + "0 jpg k9\n", kCachedShard, 8192, mtime));  // trailing line
  CHECK_FALSE(wds::parse_index_cache(text.substr(0, text.size() - 1), kCachedShard, 8192, mtime));  // cut
  CHECK_FALSE(wds::parse_index_cache("", kCachedShard, 8192, mtime));
}

TEST_CASE("webdataset cache: prepare writes one index per shard; create reads them while each shard is unchanged") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_cache");
  const fs::path cache_dir = dir / "index";
  const std::string pattern = write_shards(dir / "shards");
  const std::vector<std::string> shards = wds::expand_shard_pattern(pattern, "shards");
  PluginLibrary lib("webdataset");
  FakeConfig cfg;
  configure(lib, cfg, pattern, cache_dir);
  const tp_dataset_v1_t& table = lib.dataset_table(kWebDatasetId);
  REQUIRE((table.prepare != nullptr));

  // create without prepare indexes every shard and writes nothing: only prepare (one rank per node) writes.
  { Dataset fresh(lib, kWebDatasetId, cfg, "train"); CHECK(fresh.size() == 5); }
  CHECK(last_log(lib).find("0 indexes from the cache, " + std::to_string(shards.size()) + " shards indexed now") !=
        std::string::npos);
  CHECK(index_files(cache_dir).empty());

  REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
  const std::vector<fs::path> files = index_files(cache_dir);
  REQUIRE(files.size() == shards.size());  // no temporary file left beside them
  for (const fs::path& file : files) CHECK(file.extension() == ".index");
  const std::string before = file_text(files[0]);
  REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);  // idempotent: reads, rewrites nothing
  CHECK(file_text(files[0]) == before);
  CHECK(last_log(lib).find(std::to_string(shards.size()) + " indexes from the cache, 0 shards") != std::string::npos);

  std::vector<std::vector<uint8_t>> want;
  {
    Dataset cached(lib, kWebDatasetId, cfg, "train");
    CHECK(last_log(lib).find(std::to_string(shards.size()) + " indexes from the cache, 0 shards") != std::string::npos);
    for (uint64_t i = 0; i < cached.size(); ++i) want.push_back(cached.get(i).bytes());
  }

  SUBCASE("a shard rewritten is indexed again, the others still come from the cache") {
    const std::size_t last_count = wds::index_shard_file(shards.back()).samples.size();
    wds::ShardWriter again((dir / "rewritten").string(), "c", 1 << 20);
    for (int i = 0; i < 3; ++i) again.add("9" + std::to_string(i), {{"png", encoded_image(8, 8, i)}, {"cls", "1"}});
    fs::copy_file(again.finish().paths[0], shards.back(), fs::copy_options::overwrite_existing);
    Dataset changed(lib, kWebDatasetId, cfg, "train");
    CHECK(last_log(lib).find(std::to_string(shards.size() - 1) + " indexes from the cache, 1 shards indexed now") !=
          std::string::npos);
    CHECK(changed.size() == want.size() - last_count + 3);
  }
  SUBCASE("a garbled or planted index is ignored: the shard is indexed again and reads as before") {
    write_text(files[0], "torchhost webdataset index 1\ngarbage\n");
    for (std::size_t f = 1; f < files.size(); ++f) {
      std::string planted = file_text(files[f]);
      const std::size_t first = planted.find("\n0 png");  // the first sample moved off its header
      REQUIRE(first != std::string::npos);
      planted.replace(first, 6, "\n3 png");
      write_text(files[f], planted);
    }
    Dataset reread(lib, kWebDatasetId, cfg, "train");
    CHECK(last_log(lib).find("0 indexes from the cache") != std::string::npos);
    REQUIRE(reread.size() == want.size());
    for (uint64_t i = 0; i < reread.size(); ++i) CHECK(reread.get(i).bytes() == want[i]);
  }
  SUBCASE("a default cache directory others may write costs the cache, not the run: indexed in memory") {
    const fs::path xdg = dir / "xdg";
    fs::create_directories(xdg / "torchhost");
    fs::permissions(xdg / "torchhost", fs::perms::all);  // 0777: anyone could plant an index there
    const tp::test::ScopedEnv env("XDG_CACHE_HOME", xdg.c_str());
    cfg.values["cache_dir"] = std::string();
    REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
    bool warned = false;
    for (const std::string& line : lib.host.logs) warned = warned || line.find("indexed in memory") != std::string::npos;
    CHECK(warned);
    Dataset uncached(lib, kWebDatasetId, cfg, "train");
    CHECK(uncached.size() == want.size());
    CHECK(last_log(lib).find("0 indexes from the cache") != std::string::npos);
    CHECK(fs::is_empty(xdg / "torchhost"));
  }
  SUBCASE("cache = false reads and writes no index") {
    cfg.values["cache"] = false;
    fs::remove_all(cache_dir);
    REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
    Dataset uncached(lib, kWebDatasetId, cfg, "train");
    CHECK(uncached.size() == want.size());
    CHECK_FALSE(fs::exists(cache_dir));
  }
}

// Issue 58, items 1 and 8: a cache directory may be a team's. A symlink another user planted at
// the temporary's predictable name (`<index>.tmp.<pid>`) made the writer overwrite the file it
// pointed at; a planted index that begins past the shard's first sample dropped the leading
// samples silently; and prepare wrote into a directory others can write.
TEST_CASE("webdataset cache in a shared directory: no write through a link, no dropped samples, read-only") {
  const fs::path dir = tp::test::fresh_fixture_dir("wds_shared_cache");
  const fs::path cache_dir = dir / "team_index";
  fs::create_directories(cache_dir);
  const std::string pattern = write_shards(dir / "shards");
  const std::vector<std::string> shards = wds::expand_shard_pattern(pattern, "shards");
  const fs::path victim = dir / "private.key";
  write_text(victim, "secret");

  SUBCASE("the writer never follows a link planted at its temporary's name") {
    ::chmod(cache_dir.c_str(), 0777);
    const std::string cache = wds::index_cache_path(cache_dir.string(), shards[0]);
    const std::string old_temporary = cache + ".tmp." + std::to_string(::getpid());
    REQUIRE(tp::test::as_other_user([&] { return ::symlink(victim.c_str(), old_temporary.c_str()) == 0; }));
    const wds::ShardIndex index = wds::index_shard_file(shards[0]);
    wds::write_index_cache(cache, shards[0], index);
    CHECK(file_text(victim) == "secret");
    CHECK_FALSE(fs::is_symlink(cache));
    // Never read while others can write the directory (security trial F8); read once they cannot.
    CHECK_FALSE(wds::read_index_cache(cache, shards[0], index.file_size, index.mtime_ns));
    ::chmod(cache_dir.c_str(), 0755);
    CHECK(wds::read_index_cache(cache, shards[0], index.file_size, index.mtime_ns));
  }
  SUBCASE("an index that starts past the shard's first sample is not used: no sample dropped") {
    PluginLibrary lib("webdataset");
    FakeConfig cfg;
    configure(lib, cfg, pattern, cache_dir);
    const tp_dataset_v1_t& table = lib.dataset_table(kWebDatasetId);
    REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
    uint64_t total = 0;
    {
      Dataset whole(lib, kWebDatasetId, cfg, "train");
      total = whole.size();
    }
    // The index of shard 0 without its first sample, and one of shard 1 with no sample at all:
    // each well formed, each would drop samples unseen.
    wds::ShardIndex first = wds::index_shard_file(shards[0]);
    REQUIRE(first.samples.size() >= 2);
    first.samples.erase(first.samples.begin());
    write_text(wds::index_cache_path(cache_dir.string(), shards[0]), wds::format_index_cache(shards[0], first));
    wds::ShardIndex second = wds::index_shard_file(shards[1]);
    second.samples.clear();
    write_text(wds::index_cache_path(cache_dir.string(), shards[1]), wds::format_index_cache(shards[1], second));
    Dataset reread(lib, kWebDatasetId, cfg, "train");
    CHECK(reread.size() == total);
    CHECK(last_log(lib).find(std::to_string(shards.size() - 2) + " indexes from the cache, 2 shards indexed now") !=
          std::string::npos);
  }
  // Security trial F8: such a directory's files were read (a planted index drops or reorders
  // samples); now nothing there is used.
  SUBCASE("an explicit cache_dir other users can write is neither read nor written, with a warning") {
    PluginLibrary lib("webdataset");
    FakeConfig cfg;
    configure(lib, cfg, pattern, cache_dir);
    const tp_dataset_v1_t& table = lib.dataset_table(kWebDatasetId);
    REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);  // 0755, this user's: written
    REQUIRE(index_files(cache_dir).size() == shards.size());
    ::chmod(cache_dir.c_str(), 0775);
    fs::remove(index_files(cache_dir).front());
    REQUIRE(table.prepare(&lib.host.host, &cfg.view, "train") == TP_OK);
    bool warned = false;
    for (const std::string& line : lib.host.logs)
      warned = warned || (line.find("is not used: other users can write to it (mode 0775") != std::string::npos);
    CHECK(warned);
    CHECK(index_files(cache_dir).size() == shards.size() - 1);  // the missing index was not rewritten
    Dataset reader(lib, kWebDatasetId, cfg, "train");             // nor the others read
    CHECK(last_log(lib).find("0 indexes from the cache, " + std::to_string(shards.size()) + " shards indexed now") !=
          std::string::npos);
  }
}
