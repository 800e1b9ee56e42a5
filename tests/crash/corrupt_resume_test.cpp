// A damaged checkpoint, end to end through `host`: a truncated or bit-flipped last.pt makes
// `--resume auto` fall back to the newest different file that loads (skipping the names
// hard-linked to the damaged one), say so in the log and finish the run; `--resume PATH` to a
// damaged file exits 4 naming it. A history.jsonl whose last line a kill -9 tore is resumed
// without that line: dropped with a warning, never read, never kept.
#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_seal.h"

#include "integration/host_runner.h"
#include "support/run_files.h"

#include <doctest/doctest.h>

namespace {

// 2 epochs of 2048 samples / 32 = 128 optimizer steps; a save every 10 steps and at the end, the 3
// newest numbered ones kept (step-110, step-120, step-128); a history line every 8 steps.
const std::string kCorruptResumeArgs =
    "--config tests/integration/accumulation.toml --set progress.mode=\"off\" --set run.threads=1 "
    "--set checkpoint.strategy=\"steps\" --set checkpoint.every=10 --set checkpoint.keep_last=3 "
    "--set train.log_every_steps=8 ";

using tp::test::contains;

void flip_byte(const std::filesystem::path& file, std::size_t at) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x04));
}

}  // namespace

TEST_CASE("--resume auto falls back past a truncated, then a bit-flipped last.pt, and the run finishes") {
  // The config never changes between the runs (a schedule refuses to continue another length), so
  // the first run goes to the end and the damage is done to its final checkpoint.
  const auto dir = tp::test::fresh_dir("crash_corrupt_resume");
  const auto ckpt = dir / "checkpoints";
  const std::string args = kCorruptResumeArgs + "--output-dir '" + dir.string() + "' ";
  const auto first = tp::test::run_host(args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  REQUIRE(tp::load_checkpoint(ckpt / "last.pt").step == 128);
  REQUIRE(std::filesystem::exists(ckpt / "step-00000128.pt")); // the same file as last.pt
  REQUIRE(std::filesystem::exists(ckpt / "step-00000120.pt"));

  // 1. Truncate last.pt in place: step-00000128.pt (its hard link) is truncated with it. And tear
  //    history.jsonl as a kill -9 in the middle of appending step 120's record would: read as it
  //    stands, the torn line is a record of step 1.
  std::filesystem::resize_file(ckpt / "last.pt", std::filesystem::file_size(ckpt / "last.pt") / 2);
  std::ofstream(dir / "history.jsonl", std::ios::app) << "{\"kind\":\"step\",\"step\":1";
  const auto second = tp::test::run_host(args + "--resume auto");
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(contains(second.output, "the last line of " + (dir / "history.jsonl").string() + " is incomplete"));
  CHECK(contains(second.output, "it is dropped"));
  CHECK(contains(second.output, "cannot resume from " + (ckpt / "last.pt").string()));
  CHECK(contains(second.output, "skipping " + (ckpt / "step-00000128.pt").string()));
  CHECK(contains(second.output, "resuming from " + (ckpt / "step-00000120.pt").string()));
  CHECK(contains(second.output, ", step 120"));
  CHECK(tp::load_checkpoint(ckpt / "last.pt").step == 128);

  // 2. Flip one byte in the middle of the new last.pt (tensor data: only the checksum sees it).
  flip_byte(ckpt / "last.pt", std::filesystem::file_size(ckpt / "last.pt") / 2);
  const auto third = tp::test::run_host(args + "--resume auto");
  INFO(third.output);
  REQUIRE(third.exit_code == 0);
  CHECK(contains(third.output, "CRC-32C"));
  CHECK(contains(third.output, "resuming from " + (ckpt / "step-00000120.pt").string()));
  CHECK(tp::load_checkpoint(ckpt / "last.pt").step == 128);

  // 3. An explicit --resume to a damaged file is refused with its name and exit code 4.
  flip_byte(ckpt / "step-00000110.pt", 100);
  const auto refused = tp::test::run_host(args + "--resume '" + (ckpt / "step-00000110.pt").string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == tp::kExitCheckpoint);
  CHECK(contains(refused.output, (ckpt / "step-00000110.pt").string()));
  CHECK(contains(refused.output, "damaged"));

  // Whole records only, each logged step once, in order (the torn line neither read nor kept).
  const std::vector<int64_t> steps = tp::test::whole_history_steps(dir / "history.jsonl");
  REQUIRE(steps.size() == 16);
  for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == 8 * (static_cast<int64_t>(i) + 1));
}

TEST_CASE("a run that starts afresh after a kill tore history.jsonl's last line sets that attempt aside") {
  // Killed before its first checkpoint, an attempt leaves history lines (the last one torn) and no
  // resume point: --resume auto starts afresh. It appended once (its first record merged into the
  // torn line before a fix), then on lines of its own beside the dead attempt's; now the attempt's
  // files move into earlier/<time>/ untouched and the new history holds this run's records alone.
  const auto dir = tp::test::fresh_dir("crash_torn_history_fresh");
  const std::string dead = "{\"kind\":\"step\",\"step\":8,\"train/loss\":0.5}\n{\"kind\":\"step\",\"st";
  std::ofstream(dir / "history.jsonl") << dead;
  const auto run = tp::test::run_host(kCorruptResumeArgs + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "held an earlier attempt's history but no checkpoint"));
  const std::vector<int64_t> steps = tp::test::whole_history_steps(dir / "history.jsonl");
  REQUIRE(steps.size() == 16);
  CHECK(steps.front() == 8);
  CHECK(steps.back() == 128);
  std::vector<std::filesystem::path> earlier;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "earlier")) earlier.push_back(entry.path());
  REQUIRE(earlier.size() == 1);
  CHECK(tp::test::read_text(earlier[0] / "history.jsonl") == dead);
}
