// Issue 58, item 1: the host's temporary-then-rename writers in a directory other users can
// write. The temporaries had predictable names (`.<name>.tmp-<pid>`, `<output>.partial-<pid>`) and
// were opened without O_EXCL | O_NOFOLLOW: a symlink another user planted at the next name made
// a run as root overwrite the root-owned file it pointed at.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "support/other_user.h"
#include "tp/framework/engine/prediction_writer.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/stale_temporaries.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

std::string text_of(const fs::path& file) {
  std::ostringstream text;
  text << std::ifstream(file).rdbuf();
  return text.str();
}

/// A directory anyone may write to, without the sticky bit (a team's), and a private victim
/// file outside it.
struct SharedDir {
  fs::path dir, victim;
  explicit SharedDir(const std::string& name) {
    const fs::path base = fs::temp_directory_path() / "tp_exclusive_file_test" / name;
    fs::remove_all(base);
    dir = base / "shared";
    fs::create_directories(dir);
    ::chmod(dir.c_str(), 0777);
    victim = base / "private.key";
    std::ofstream(victim) << "secret";
    ::chmod(victim.c_str(), 0600);
  }
  /// Plants, as the other user, a symlink to the victim at `name` in the shared directory.
  void plant(const std::string& name) const {
    const fs::path link = dir / name;
    REQUIRE(tp::test::as_other_user([&] { return ::symlink(victim.c_str(), link.c_str()) == 0; }));
  }
};

}  // namespace

TEST_CASE("write_file_atomically never writes through a link planted at a temporary's name") {
  const SharedDir shared("atomic");
  shared.plant(".config.toml.tmp-" + std::to_string(::getpid()));  // the old, predictable name
  tp::write_file_atomically(shared.dir / "config.toml", std::string("lr = 0.1\n"));
  CHECK(text_of(shared.victim) == "secret");
  CHECK(text_of(shared.dir / "config.toml") == "lr = 0.1\n");
  // A link planted at the target itself is replaced, never followed.
  shared.plant("history.csv");
  tp::write_file_atomically(shared.dir / "history.csv", std::string("step\n"));
  CHECK_FALSE(fs::is_symlink(shared.dir / "history.csv"));
  CHECK(text_of(shared.victim) == "secret");
  tp::link_file_atomically(shared.dir / "config.toml", shared.dir / "best.toml");
  CHECK(text_of(shared.dir / "best.toml") == "lr = 0.1\n");
  for (const auto& entry : fs::directory_iterator(shared.dir))  // no temporary left but the planted link
    CHECK((tp::temporary_pid(entry.path().filename().string()) < 0 || fs::is_symlink(entry.path())));
}

TEST_CASE("write_file_atomically in pieces: the pieces in order; a failure midway keeps the previous file") {
  const fs::path dir = fs::temp_directory_path() / "tp_exclusive_file_test" / "pieces";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "last.pt";
  tp::write_file_atomically(file, [](const tp::AppendBytes& append) {
    append("first ", 6);
    append("", 0);
    append("second", 6);
  });
  CHECK(text_of(file) == "first second");
  CHECK_THROWS_WITH(tp::write_file_atomically(file,
                                              [](const tp::AppendBytes& append) {
                                                append("half of a new", 13);
                                                throw std::runtime_error("the writer failed");
                                              }),
                    "the writer failed");
  CHECK(text_of(file) == "first second");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);  // no temporary left behind
}

TEST_CASE("a prediction's partial file is created exclusively, never through a planted link") {
  const SharedDir shared("predict");
  shared.plant("p.csv.partial-" + std::to_string(::getpid()));  // the old, predictable name
  { const auto writer = tp::PredictionWriter::open(shared.dir / "p.csv", "csv"); }  // opened, then abandoned
  CHECK(text_of(shared.victim) == "secret");
  shared.plant("map.partial-" + std::to_string(::getpid()));
  { const auto writer = tp::PredictionWriter::open(shared.dir / "map", "png"); }
  CHECK(text_of(shared.victim) == "secret");
}

TEST_CASE("exclusive temporaries: unpredictable names that end with the pid the sweep reads") {
  const SharedDir shared("names");
  const fs::path target = shared.dir / "last.pt";
  const tp::ExclusiveTemporary first = tp::create_exclusive_temporary(target, ".tmp-");
  const tp::ExclusiveTemporary second = tp::create_exclusive_temporary(target, ".tmp-");
  CHECK(first.path != second.path);
  CHECK(first.fd >= 0);
  CHECK(first.path.filename().string().starts_with(".last.pt."));
  CHECK(tp::temporary_pid(first.path.filename().string()) == ::getpid());
  ::close(first.fd);
  ::close(second.fd);
  const tp::ExclusiveTemporary partial = tp::create_exclusive_temporary_directory(shared.dir / "out", ".partial-");
  CHECK(fs::is_directory(partial.path));
  CHECK(partial.path.filename().string().starts_with("out."));
  CHECK(tp::temporary_pid(partial.path.filename().string()) == ::getpid());
}
