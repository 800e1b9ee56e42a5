// The datasets' prepare entry (ABI 1.5, PLG-17): on 2 Gloo ranks of one node it runs exactly once
// per split, on local rank 0, before any rank creates a dataset; when it fails, every rank ends
// with its message. SIGTERM during prepare or create stops `host train` there: exit 143, a message,
// and a run directory without anything half-written.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "support/run_files.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(tp::test::read_text(file));
  for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.rfind(' '))); // drop the pid
  return lines;
}

tp::test::HostRun train_two_ranks(const fs::path& dir, const std::string& extra) {
  return tp::test::run_host("--nproc-per-node 2 train --config tests/predict/prepare_probe.toml --plugin-dir '" +
                            std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                            "' --set 'data.train.log=\"" + (dir / "calls.log").string() + "\"' " + extra);
}

}  // namespace

TEST_CASE("prepare runs once per split on local rank 0, before any rank creates a dataset") {
  const fs::path dir = tp::test::fresh_dir("prepare_once");
  const auto run = train_two_ranks(dir, "");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::vector<std::string> calls = lines_of(dir / "calls.log");
  CAPTURE(tp::test::read_text(dir / "calls.log"));
  // train and val (val_from_train) each prepared once, then each rank creates both.
  REQUIRE(calls.size() == 6);
  CHECK(calls[0] == "prepare train");
  CHECK(calls[1] == "prepare val");
  CHECK(std::count(calls.begin(), calls.end(), "create train") == 2);
  CHECK(std::count(calls.begin(), calls.end(), "create val") == 2);
  CHECK(run.output.find("prepared the train split of org.torchhost.test.prepare_probe") != std::string::npos);
}

TEST_CASE("a failing prepare ends every rank with its message, and no rank creates a dataset") {
  const fs::path dir = tp::test::fresh_dir("prepare_fails");
  const auto run = train_two_ranks(dir, "--set data.train.fail=true");
  INFO(run.output);
  CHECK(run.exit_code != 0);
  const std::string message = "split train is damaged (requested by fail = true)";
  // Rank 0 reports its own error; rank 1 relays it, naming rank 0.
  std::size_t seen = 0;
  for (auto at = run.output.find(message); at != std::string::npos; at = run.output.find(message, at + 1)) ++seen;
  CHECK(seen >= 2);
  CHECK(run.output.find("dataset preparation failed on rank 0") != std::string::npos);
  CHECK(run.output.find("plugin component 'org.torchhost.test.prepare_probe'") != std::string::npos);
  CHECK(lines_of(dir / "calls.log") == std::vector<std::string>{"prepare train"});
}

TEST_CASE("a prepare longer than dist.timeout_s: the ranks wait for it up to dist.prepare_timeout_s, and say so") {
  // Before dist.prepare_timeout_s the waiting rank sat in an all-reduce that dist.timeout_s (here
  // 2 s) ended long before the two 3 s prepares (train, val) were done.
  const fs::path dir = tp::test::fresh_dir("prepare_slow");
  const auto run = train_two_ranks(dir, "--set data.train.prepare_ms=3000 --set dist.timeout_s=2.0 --set dist.prepare_timeout_s=120.0");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("rank 1: waits for the datasets' prepare on local rank 0") != std::string::npos);
  CHECK(run.output.find("at most dist.prepare_timeout_s = 120 s") != std::string::npos);
}

TEST_CASE("a prepare longer than dist.prepare_timeout_s ends the waiting ranks with the key to raise") {
  const fs::path dir = tp::test::fresh_dir("prepare_too_slow");
  const auto run = train_two_ranks(dir, "--set data.train.prepare_ms=4000 --set dist.prepare_timeout_s=2.0");
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK(run.output.find("Raise dist.prepare_timeout_s") != std::string::npos);
}

TEST_CASE("SIGTERM while a dataset is prepared or created stops host train cleanly with exit 143") {
  for (const std::string phase : {"prepare", "create"}) {
    CAPTURE(phase);
    const fs::path dir = tp::test::fresh_dir("prepare_sigterm_" + phase);
    const fs::path calls = dir / "calls.log";
    // The call takes 0.6 s; the signal comes as soon as the call has logged that it started.
    const auto run = tp::test::run_shell(
        "'" + std::string(tp::test::build_dir()) + "/bin/host' train --config tests/predict/prepare_probe.toml " +
        "--plugin-dir '" + tp::test::fixture_plugin_dir() + "' --output-dir '" + dir.string() + "' --set 'data.train.log=\"" +
        calls.string() + "\"' --set data.train." + phase + "_ms=600 & pid=$!; for i in $(seq 1 3000); do grep -q '^" +
        phase + " train' '" + calls.string() + "' 2>/dev/null && break; sleep 0.02; done; kill -TERM $pid; wait $pid; " +
        "echo \"exit=$?\"");
    INFO(run.output);
    CHECK(run.output.find("exit=143") != std::string::npos);
    CHECK(run.output.find(std::string("host train stopped by signal 15 while the ") +
                          (phase == "prepare" ? "datasets were prepared" : "components were created") +
                          ", before training started; nothing was trained and no checkpoint written.") !=
          std::string::npos);
    // Nothing of the training was started, and nothing is half-written.
    CHECK_FALSE(fs::exists(dir / "checkpoints"));
    CHECK_FALSE(fs::exists(dir / "history.jsonl"));
    CHECK(tp::test::temporaries_below(dir) == "");
    CHECK(fs::exists(dir / "config.toml"));
  }
}
