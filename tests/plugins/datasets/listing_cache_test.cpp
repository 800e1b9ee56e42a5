// image_folder's listing cache as untrusted input (issue 27): a cache file chooses which files the
// dataset opens and which labels it serves, so a read must refuse what no scan writes (a label
// outside the classes, a path outside the root), and the default directory must be per user and
// private. Before the fix the reader took any label and any path (an out-of-range label reached
// the loss; "/etc/..." was opened as an image), and without $HOME the cache went to the shared,
// world-writable /tmp/torchhost-cache.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cache_dir.h"
#include "listing_cache.h"
#include "support/other_user.h"
#include "support/scoped_env.h"
#include "tp/cpp/guard.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
namespace ds = tp::datasets;
namespace ifo = tp::image_folder;
using tp::test::ScopedEnv;

const std::vector<std::string> kExtensions = {".png"};

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "tp_listing_cache_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// A root with classes cat and dog (no images needed: the cache holds names) and a cache of the
/// listing `rows` (label, path) written by the plugin's own writer.
std::optional<ifo::Listing> round_trip(const fs::path& dir, const std::vector<std::pair<int64_t, std::string>>& rows) {
  const fs::path root = dir / "root";
  fs::create_directories(root / "cat");
  fs::create_directories(root / "dog");
  ifo::Listing listing;
  listing.classes = {"cat", "dog"};
  for (const auto& [label, path] : rows) {
    listing.labels.push_back(label);
    listing.paths.push_back(path);
  }
  const std::string cache = (dir / "listing.index").string();
  ifo::write_listing_cache(cache, root.string(), kExtensions, listing, {root.string()});
  return ifo::read_listing_cache(cache, root.string(), kExtensions);
}

std::string read_text_file(const fs::path& file) {
  std::ostringstream text;
  text << std::ifstream(file).rdbuf();
  return text.str();
}

mode_t mode_of(const fs::path& dir) {
  struct stat info {};
  REQUIRE(::stat(dir.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

}  // namespace

TEST_CASE("listing cache: a listing a scan could write reads back as written") {
  const fs::path dir = scratch("good");
  const std::string root = (dir / "root").string();
  const auto listing = round_trip(dir, {{0, root + "/cat/a.png"}, {1, root + "/dog/sub/b.png"}});
  REQUIRE(listing.has_value());
  CHECK(listing->labels == std::vector<int64_t>{0, 1});
  CHECK(listing->paths[1] == root + "/dog/sub/b.png");
}

TEST_CASE("listing cache: a label outside the class count is refused (the folder is scanned again)") {
  const fs::path dir = scratch("labels");
  const std::string root = (dir / "root").string();
  CHECK_FALSE(round_trip(dir, {{0, root + "/cat/a.png"}, {2, root + "/dog/b.png"}}).has_value());
  CHECK_FALSE(round_trip(dir, {{0, root + "/cat/a.png"}, {-1, root + "/dog/b.png"}}).has_value());
}

TEST_CASE("listing cache: a path outside the dataset root is refused") {
  const fs::path dir = scratch("paths");
  const std::string root = (dir / "root").string();
  for (const std::string& outside : {std::string("/etc/hostname"), root + "/../secret.png",
                                     root + "/cat/../../secret.png", std::string("relative/x.png"), root,
                                     root + "_sibling/cat/a.png"}) {
    CAPTURE(outside);
    CHECK_FALSE(round_trip(dir, {{0, root + "/cat/a.png"}, {1, outside}}).has_value());
  }
}

TEST_CASE("listing cache: hostile counts are refused, not reserved or parsed loosely") {
  const fs::path dir = scratch("counts");
  const std::string root = (dir / "root").string();
  REQUIRE(round_trip(dir, {{0, root + "/cat/a.png"}}).has_value());
  const std::string cache = (dir / "listing.index").string();
  std::ostringstream text;
  text << std::ifstream(cache).rdbuf();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\n1\n0\t", "\n999999999999999999\n0\t"}, {"\n1\n0\t", "\n-1\n0\t"}, {"\n0\t", "\n0x\t"}}) {
    CAPTURE(to);
    std::string edited = text.str();
    REQUIRE(edited.find(from) != std::string::npos);
    edited.replace(edited.find(from), from.size(), to);
    std::ofstream(cache, std::ios::trunc) << edited;
    CHECK_FALSE(ifo::read_listing_cache(cache, root, kExtensions).has_value());
  }
}

TEST_CASE("listing cache: the default directory is per user, created 0700, never /tmp/torchhost-cache") {
  const fs::path dir = scratch("default");
  SUBCASE("$XDG_CACHE_HOME/torchhost") {
    const ScopedEnv xdg("XDG_CACHE_HOME", (dir / "xdg").c_str());
    const std::string path = ifo::listing_cache_path("", "some/root", kExtensions);
    CHECK(fs::path(path).parent_path() == dir / "xdg" / "torchhost");
    CHECK(mode_of(dir / "xdg" / "torchhost") == 0700);
  }
  SUBCASE("$HOME/.cache/torchhost, a relative $XDG_CACHE_HOME being ignored") {
    const ScopedEnv xdg("XDG_CACHE_HOME", "relative/cache");
    const ScopedEnv home("HOME", (dir / "home").c_str());
    const std::string path = ifo::listing_cache_path("", "some/root", kExtensions);
    CHECK(fs::path(path).parent_path() == dir / "home" / ".cache" / "torchhost");
    CHECK(mode_of(dir / "home" / ".cache" / "torchhost") == 0700);
  }
  SUBCASE("without $HOME: the password database's home, not a shared directory") {
    const ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    const ScopedEnv home("HOME", nullptr);
    std::string path;
    try {
      path = ifo::listing_cache_path("", "some/root", kExtensions);
    } catch (const tp::cpp::Failure& e) {
      MESSAGE("no usable home directory here: " << e.what());  // refused, which is also not /tmp
    }
    CHECK(path.find("/tmp/torchhost-cache") == std::string::npos);
  }
}

TEST_CASE("listing cache: a default directory others may write to, or of another user, is refused") {
  const fs::path dir = scratch("refused");
  const ScopedEnv xdg("XDG_CACHE_HOME", dir.c_str());
  const fs::path cache_dir = dir / "torchhost";
  fs::create_directories(cache_dir);
  ::chmod(cache_dir.c_str(), 0777);
  CHECK_THROWS_WITH_AS(ifo::listing_cache_path("", "some/root", kExtensions),
                       doctest::Contains("refusing the listing cache directory"), tp::cpp::Failure);
  ::chmod(cache_dir.c_str(), 0700);
  CHECK_NOTHROW(ifo::listing_cache_path("", "some/root", kExtensions));
  if (::geteuid() == 0) {  // only root can hand a directory to another user
    REQUIRE(::chown(cache_dir.c_str(), 65534, 65534) == 0);
    CHECK_THROWS_WITH_AS(ifo::listing_cache_path("", "some/root", kExtensions), doctest::Contains("uid 65534"),
                         tp::cpp::Failure);
  }
  // An explicit cache_dir is the user's choice, used as given.
  CHECK(fs::path(ifo::listing_cache_path((dir / "mine").string(), "some/root", kExtensions)).parent_path() ==
        dir / "mine");
}

// Issue 58, item 1: the cache directory may be a team's. Another user planted a symlink at the
// temporary's predictable name (`<cache>.tmp.<pid>`) and the writer, running as root, overwrote
// the file it pointed at; a FIFO or /dev/zero planted at the cache's own name hung the reader or
// grew its memory without bound.
TEST_CASE("listing cache in a shared directory: never written through a planted link, never read from a FIFO") {
  const fs::path dir = scratch("shared");
  ::chmod(dir.c_str(), 0777);  // a team directory, without the sticky bit
  const fs::path victim = scratch("shared_victim") / "private.key";
  std::ofstream(victim) << "secret";
  ::chmod(victim.c_str(), 0600);
  const fs::path root = dir / "root";
  fs::create_directories(root / "cat");
  ifo::Listing listing;
  listing.classes = {"cat"};
  listing.labels = {0};
  listing.paths = {(root / "cat" / "a.png").string()};
  const std::string cache = (dir / "listing.index").string();
  const std::string old_temporary = cache + ".tmp." + std::to_string(::getpid());
  REQUIRE(tp::test::as_other_user([&] { return ::symlink(victim.c_str(), old_temporary.c_str()) == 0; }));

  ifo::write_listing_cache(cache, root.string(), kExtensions, listing, {root.string()});
  CHECK(read_text_file(victim) == "secret");
  // Read back once only its owner can write the directory (a cache others can write is never
  // read: the next test case).
  ::chmod(dir.c_str(), 0755);
  const std::optional<ifo::Listing> back = ifo::read_listing_cache(cache, root.string(), kExtensions);
  ::chmod(dir.c_str(), 0777);
  REQUIRE(back);
  CHECK(back->paths == listing.paths);
  for (const auto& entry : fs::directory_iterator(dir))  // only the cache, the root and the planted link
    CHECK((entry.path() == cache || entry.path() == root || entry.path() == old_temporary));

  // Planted at the cache's name: a FIFO (no writer: a blocking open would wait for ever), a link
  // to /dev/zero (endless bytes without a newline) and a link to the victim are all ignored.
  fs::remove(cache);
  REQUIRE(::mkfifo(cache.c_str(), 0666) == 0);
  CHECK_FALSE(ifo::read_listing_cache(cache, root.string(), kExtensions));
  fs::remove(cache);
  fs::create_symlink("/dev/zero", cache);
  CHECK_FALSE(ifo::read_listing_cache(cache, root.string(), kExtensions));
  fs::remove(cache);
  fs::create_symlink(victim, cache);
  CHECK_FALSE(ifo::read_listing_cache(cache, root.string(), kExtensions));
  // The writer replaces the planted link itself (rename), never the file behind it.
  ifo::write_listing_cache(cache, root.string(), kExtensions, listing, {root.string()});
  CHECK_FALSE(fs::is_symlink(cache));
  CHECK(read_text_file(victim) == "secret");
}

// Security trial F8: a listing another user rewrote in a shared cache_dir (0777) dropped 14 of 16
// dog images and served three cats as dogs; the reader checked labels against the class count and
// paths against the root, which such a file passes, and read it with a warning that it was "only
// read". A cache others can write, or in a directory others can write, is now never read; and a
// label must be the class folder its path lies in, as a scan gives it.
TEST_CASE("listing cache: never read where others can write it; a label must be its path's class folder") {
  const fs::path dir = scratch("poisoned");
  const std::string root = (dir / "root").string();
  const std::vector<std::pair<int64_t, std::string>> rows = {{0, root + "/cat/a.png"}, {1, root + "/dog/b.png"}};
  REQUIRE(round_trip(dir, rows).has_value());
  const std::string cache = (dir / "listing.index").string();
  ::chmod(dir.c_str(), 0777);
  CHECK_FALSE(ifo::read_listing_cache(cache, root, kExtensions).has_value());
  ::chmod(dir.c_str(), 01777);  // the sticky bit keeps others from renaming, not from writing new files
  CHECK_FALSE(ifo::read_listing_cache(cache, root, kExtensions).has_value());
  ::chmod(dir.c_str(), 0755);
  CHECK(ifo::read_listing_cache(cache, root, kExtensions).has_value());
  ::chmod(cache.c_str(), 0666);
  CHECK_FALSE(ifo::read_listing_cache(cache, root, kExtensions).has_value());
  ::chmod(cache.c_str(), 0644);
  CHECK(ifo::read_listing_cache(cache, root, kExtensions).has_value());
  // A cat relabelled as a dog, with both classes' counts intact.
  CHECK_FALSE(round_trip(dir, {{1, root + "/cat/a.png"}, {1, root + "/dog/b.png"}}).has_value());
  CHECK_FALSE(round_trip(dir, {{0, root + "/cat/a.png"}, {0, root + "/dog/sub/b.png"}}).has_value());
}

TEST_CASE("shared_write_refusal: a cache_dir another user can write is read, never written") {
  const fs::path dir = scratch("refusal");
  ::chmod(dir.c_str(), 0755);
  CHECK(ds::shared_write_refusal(dir.string()).reason.empty());
  CHECK(ds::shared_write_refusal((dir / "not_yet").string()).reason.empty());  // created by this user when written
  ::chmod(dir.c_str(), 0775);
  CHECK(ds::shared_write_refusal(dir.string()).reason.find("mode 0775") != std::string::npos);
  CHECK(ds::shared_write_refusal(dir.string()).warn);
  ::chmod(dir.c_str(), 01777);
  CHECK(ds::shared_write_refusal(dir.string()).reason.find("other users can write to it") != std::string::npos);
  if (::geteuid() == 0) {  // a directory of another user, even 0755: its owner can plant files
    ::chmod(dir.c_str(), 0775);
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    CHECK(ds::shared_write_refusal(dir.string()).reason.find("owner uid 65534") != std::string::npos);
    CHECK(ds::shared_write_refusal(dir.string()).warn);  // its group can write too
    // The ops trial (finding 7): a team's cache set up as section 15 says (one owner, 0755) read
    // "other users can write to it ... Let one user own it with mode 0755", a warning on every
    // run of every reader. It is read only for them, which is how the team meant it.
    ::chmod(dir.c_str(), 0755);
    const ds::WriteRefusal team = ds::shared_write_refusal(dir.string());
    CHECK(team.reason == "it belongs to uid 65534 (not you, uid 0) with mode 0755, so it is read only for you: what "
                         "its owner prepared there is read (every file checked as untrusted input), and nothing is "
                         "written");
    CHECK_FALSE(team.warn);
  }
}
