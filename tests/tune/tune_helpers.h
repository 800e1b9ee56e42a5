// Shared by the `host tune` tests: the shrunken quickstart command line, a trained run whose
// checkpoints the tunes must leave alone, file snapshots, CSV rows and the oracle's Python.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace tp::test {

/// The quickstart (small_cnn on shapes) at a size that trains in seconds on 2 cores. One
/// intra-op thread: with two, a core busy with anything else slows every step 5-10x (the pool's
/// threads wait for each other).
inline const std::string kQuick =
    "--config configs/quickstart.toml --set data.train.size=512 --set data.train.val_size=64 "
    "--set train.batch_size=32 --set train.epochs=1 --set data.num_workers=0 --set run.threads=1 "
    "--set 'progress.mode=\"off\"' ";

/// A finished run of kQuick (checkpoints, history, plots), trained once per test binary.
inline const std::filesystem::path& trained_run() {
  static const std::filesystem::path dir = [] {
    const auto d = fresh_dir("tune_trained_run");
    const auto run = run_host("--output-dir '" + d.string() + "' " + kQuick);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    REQUIRE(std::filesystem::exists(d / "checkpoints" / "last.pt"));
    return d;
  }();
  return dir;
}

/// Every file under `dir`: its bytes and modification time (ns). Equal snapshots: nothing was
/// written, replaced, added or removed.
using Snapshot = std::map<std::string, std::tuple<std::string, int64_t>>;
inline Snapshot snapshot(const std::filesystem::path& dir) {
  Snapshot files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
    struct stat info {};
    ::stat(entry.path().c_str(), &info);
    const int64_t mtime = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
    files[entry.path().lexically_relative(dir).string()] = {
        entry.is_regular_file() ? read_text(entry.path()) : std::string("<dir>"), mtime};
  }
  return files;
}

/// The paths whose bytes or modification time differ between two snapshots, and those only in
/// one ("" when they are equal): CHECK(changes(before, after) == "") names what changed.
inline std::string changes(const Snapshot& before, const Snapshot& after) {
  std::string out;
  for (const auto& [path, file] : before) {
    const auto now = after.find(path);
    if (now == after.end()) out += "removed " + path + "; ";
    else if (std::get<0>(now->second) != std::get<0>(file)) out += "rewritten " + path + "; ";
    else if (std::get<1>(now->second) != std::get<1>(file)) out += "touched " + path + "; ";
  }
  for (const auto& [path, file] : after)
    if (before.count(path) == 0) out += "added " + path + "; ";
  return out;
}

/// Simple CSV (no quoting) as rows of cells; the header first.
inline std::vector<std::vector<std::string>> csv_rows(const std::filesystem::path& file) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::size_t start = 0;
    for (std::size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1)
      cells.push_back(line.substr(start, comma - start));
    cells.push_back(line.substr(start));
    rows.push_back(cells);
  }
  return rows;
}

/// The directories of `dir`/tune whose name starts with `prefix` ("lr-", "batch-").
inline std::vector<std::filesystem::path> scratch_dirs(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "tune", ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) found.push_back(entry.path());
  return found;
}

/// The Python of the Lightning oracle: .venv-bench's (lightning 2.6.6, scripts/bench_setup),
/// else the project venv's, where lr_oracle.py uses its copy of Lightning's rule.
inline std::string oracle_python() {
  return ::access(tp::test::bench_python(), X_OK) == 0 ? tp::test::bench_python() : tp::test::python();
}

}  // namespace tp::test
