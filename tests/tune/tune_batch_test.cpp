// `host tune batch-size` end to end on the CPU (docs/tune.md): under --memory-limit the chosen
// micro-batch's trial peaked below the allowance and the sizes above it that were tried did not
// (the recorded table is consistent), the trials follow the documented doubling-then-bisection
// sequence, --keep-global-batch keeps batch_size x grad_accum_steps, and SIGINT leaves the run
// directory as it was.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tune_helpers.h"
#include "support/test_paths.h"

namespace fs = std::filesystem;
using tp::test::kQuick;

namespace {

struct TrialRow {
  int64_t batch;
  double peak_mb;
  double allowance_mb;
  bool fits;
};

std::vector<TrialRow> trials(const fs::path& run_dir) {
  const auto rows = tp::test::csv_rows(run_dir / "tune" / "batch_size.csv");
  REQUIRE(rows.size() >= 2);
  CHECK(rows[0] == std::vector<std::string>{"batch", "peak_mb", "allowance_mb", "fits", "note"});
  std::vector<TrialRow> out;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    REQUIRE(rows[i].size() == 5);
    out.push_back({std::stoll(rows[i][0]), std::stod(rows[i][1]), std::stod(rows[i][2]), rows[i][3] == "1"});
  }
  return out;
}

/// The sequence docs/tune.md states, replayed on the recorded outcomes: `start` first; while
/// nothing failed, double (capped at `max`); after a failure, fit + (fail - fit) / 2 until they
/// are adjacent.
std::vector<int64_t> documented_sequence(int64_t start, int64_t max, const std::vector<TrialRow>& recorded) {
  std::vector<int64_t> sizes;
  int64_t fit = 0, fail = 0;
  for (std::size_t i = 0;; ++i) {
    int64_t next = 0;
    if (i == 0) next = std::min(start, max);
    else if (fail == 0) next = fit >= max ? 0 : std::min(2 * fit, max);
    else next = fail - fit <= 1 ? 0 : fit + (fail - fit) / 2;
    if (next == 0 || i >= recorded.size()) break;
    sizes.push_back(next);
    if (recorded[i].fits) fit = std::max(fit, next);
    else fail = fail == 0 ? next : std::min(fail, next);
  }
  return sizes;
}

}  // namespace

TEST_CASE("host tune batch-size (CPU, --memory-limit): the largest fitting micro-batch, the documented search, "
          "--keep-global-batch") {
  // The limit leaves room for about 200 samples above what a micro-batch of 1 costs on this
  // machine (LibTorch, plugins, the model: ~200 MB here; each sample ~1.6 MB more), so the
  // search has to double past it and bisect, whatever the machine's baseline.
  const auto probe_dir = tp::test::fresh_dir("tune_batch_probe");
  const auto probe = tp::test::run_host("tune batch-size --output-dir '" + probe_dir.string() + "' " + kQuick +
                                        "--memory-limit 64GiB --max 1");
  INFO(probe.output);
  REQUIRE(probe.exit_code == 0);
  const double base_mb = trials(probe_dir).at(0).peak_mb;
  const double limit_mb = std::round((base_mb + 320.0) / 0.9);
  const auto dir = tp::test::fresh_dir("tune_batch") / "run";
  // Global batch 96 x 4 = 384.
  const auto run = tp::test::run_host("tune batch-size --output-dir '" + dir.string() + "' " + kQuick +
                                      "--set train.batch_size=96 --set train.grad_accum_steps=4 --memory-limit " +
                                      std::to_string(static_cast<int64_t>(limit_mb)) +
                                      "MB --headroom 0.1 --keep-global-batch");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::vector<TrialRow> table = trials(dir);
  std::vector<int64_t> sizes;
  for (const TrialRow& t : table) sizes.push_back(t.batch);
  // min(--max none, the split's 512 samples, the global batch 384)
  CHECK(sizes == documented_sequence(96, 384, table));

  int64_t chosen = 0, smallest_failure = 0;
  for (const TrialRow& t : table) {
    CHECK(t.allowance_mb == doctest::Approx(0.9 * limit_mb)); // (1 - headroom) x limit
    CHECK(t.fits == (t.peak_mb <= t.allowance_mb)); // a trial stopped early has passed the allowance
    if (t.fits) chosen = std::max(chosen, t.batch);
    else if (smallest_failure == 0 || t.batch < smallest_failure) smallest_failure = t.batch;
  }
  REQUIRE(chosen > 0);
  for (const TrialRow& t : table) CHECK(t.fits == (t.batch <= chosen)); // monotone: fits below, fails above
  if (chosen < 384) CHECK(smallest_failure == chosen + 1); // bisected to a resolution of 1
  CHECK(run.output.find("largest micro-batch that fits: " + std::to_string(chosen) + "\n") != std::string::npos);
  MESSAGE("batch-size trials:\n" << run.output.substr(run.output.find("micro-batch trials")));

  // --keep-global-batch: the largest divisor of 384 that fits, with the accumulation that restores 384.
  const auto at = run.output.find("  --set train.batch_size=");
  REQUIRE(at != std::string::npos);
  const int64_t micro = std::stoll(run.output.substr(at + 25));
  const auto accum_at = run.output.find("--set train.grad_accum_steps=", at);
  REQUIRE(accum_at != std::string::npos);
  const int64_t accum = std::stoll(run.output.substr(accum_at + 29));
  CHECK(micro * accum == 384);
  CHECK(micro <= chosen);
  for (int64_t d = micro + 1; d <= chosen; ++d) CHECK(384 % d != 0); // no larger divisor fits
}

TEST_CASE("host tune batch-size: SIGINT stops the trial and leaves the run directory as it was") {
  const fs::path& dir = tp::test::trained_run();
  const auto before = tp::test::snapshot(dir);
  // The signal while the first trial trains (its output file newer than the marker).
  const fs::path marker = tp::test::fresh_dir("tune_batch_sigint") / "marker";
  const auto run = tp::test::run_shell(
      "touch '" + marker.string() + "'; '" + std::string(tp::test::build_dir()) + "/bin/host' tune batch-size "
      "--output-dir '" + dir.string() + "' " + kQuick + "--memory-limit 64GiB & pid=$!; for i in $(seq 1 300); do "
      "[ -n \"$(find '" + dir.string() + "/tune' -name output.log -newer '" + marker.string() +
      "' 2>/dev/null)\" ] && break; sleep 0.1; done; sleep 0.3; kill -INT $pid; wait $pid; echo \"exit=$?\"");
  INFO(run.output);
  CHECK(run.output.find("exit=130") != std::string::npos);
  CHECK(run.output.find("is as it was") != std::string::npos);
  CHECK(tp::test::changes(before, tp::test::snapshot(dir)) == "");
}
