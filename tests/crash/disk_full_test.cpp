// A full disk while a checkpoint is written: the host runs under a file-size limit (RLIMIT_FSIZE,
// `ulimit -f`, with SIGXFSZ ignored so write() fails with EFBIG instead of killing the process),
// smaller than one checkpoint. The save must fail with a message naming the checkpoint and the
// full disk/quota, leave no temporary file, and leave the previous last.pt intact and loadable.
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/host_runner.h"

#include <doctest/doctest.h>

namespace {

const std::string kArgs =
    "--config tests/integration/accumulation.toml --set progress.mode=\"off\" --set run.threads=1 "
    "--set checkpoint.strategy=\"steps\" --set checkpoint.every=50 --set checkpoint.keep_last=3 ";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a checkpoint write that hits the size limit fails clearly and keeps the previous one") {
  // Saves at steps 50, 100 and 128 (the end). The limited run resumes from step 100, so its one
  // save (step 128) must replace last.pt, and cannot.
  const auto dir = tp::test::fresh_dir("crash_disk_full");
  const auto ckpt = dir / "checkpoints";
  const std::string args = kArgs + "--output-dir '" + dir.string() + "' ";
  const auto first = tp::test::run_host(args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const auto size = std::filesystem::file_size(ckpt / "last.pt");
  const std::string before = tp::test::read_text(ckpt / "last.pt");
  REQUIRE(size > 64 * 1024);

  // Half a checkpoint fits under the limit; the logs and history stay far below it.
  const std::string limit_kib = std::to_string(size / 2 / 1024);
  const auto full = tp::test::run_shell("trap '' XFSZ; ulimit -f " + limit_kib + "; exec '" + TP_TEST_BUILD_DIR +
                                        "/bin/host' " + args + "--resume '" + (ckpt / "step-00000100.pt").string() + "'");
  INFO(full.output);
  CHECK(full.exit_code == 1);
  CHECK(contains(full.output, "saving the checkpoint of step 128 (last.pt, step-00000128.pt) in " + ckpt.string()));
  CHECK(contains(full.output, "File too large"));
  CHECK(contains(full.output, "disk quota full"));
  CHECK(contains(full.output, "intact"));

  // The previous checkpoint is byte-for-byte what it was, loads, and no temporary is left.
  CHECK(tp::test::read_text(ckpt / "last.pt") == before);
  CHECK(tp::load_checkpoint(ckpt / "last.pt").step == 128);
  CHECK(tp::load_checkpoint(ckpt / "step-00000100.pt").step == 100);
  for (const auto& entry : std::filesystem::directory_iterator(ckpt))
    CHECK_MESSAGE(!entry.path().filename().string().starts_with("."), "left behind: " << entry.path());

  // With space again, the run resumes from the intact last.pt.
  const auto again = tp::test::run_host(args + "--resume auto");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(contains(again.output, "resumed at"));
}
