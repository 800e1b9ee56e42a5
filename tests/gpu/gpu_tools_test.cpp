// The tools on CUDA: `host tune batch-size` measures its trials on the GPU (docs/tune.md: the limit
// is the device's memory from report.toml, the peak the allocator's), and `host predict` on CUDA
// writes the predictions the CPU writes from the same checkpoint (docs/predict.md).
#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "experiments/experiment_helpers.h"
#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using tp::gpu_test::contains;
using tp::gpu_test::kNeedsCuda;
using tp::test::column;

namespace {

/// The quickstart on CUDA, shrunk: 2048 training and 203 validation images.
const std::string kSmall =
    "--config configs/quickstart.toml --set run.device=\"cuda\" --set progress.mode=\"off\" --set plots.enabled=false "
    "--set train.epochs=1 --set data.train.size=2048 --set data.train.val_size=203 ";

}  // namespace

TEST_CASE("host tune batch-size on CUDA: doubles to the --max cap, every trial measured on the GPU") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // small_cnn at 32x32 needs a few MB per sample, so 64, 128, 256 and 512 all fit any GPU and the
  // search stops at the cap (docs/tune.md, "The search": start at train.batch_size, double).
  const fs::path dir = tp::test::fresh_dir("gpu_tune_batch") / "run";
  const auto run = tp::test::run_host("tune batch-size --output-dir '" + dir.string() + "' " + kSmall +
                                      "--set train.batch_size=64 --max 512");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.output, "largest micro-batch that fits: 512 (the --max cap)"));
  CHECK(contains(run.output, "  --set train.batch_size=512"));
  CHECK(contains(run.output, "peak allocated on the device"));  // the CUDA rule, not the CPU's resident set

  const auto rows = tp::test::read_csv(dir / "tune" / "batch_size.csv");
  REQUIRE(rows.size() == 5);  // the header and 64, 128, 256, 512
  REQUIRE(rows[0] == std::vector<std::string>{"batch", "peak_mb", "allowance_mb", "fits", "note"});
  const double allowance = std::stod(rows[1][2]);
  const double first_peak = std::stod(rows[1][1]);
  double previous_peak = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    CAPTURE(i);
    REQUIRE(rows[i].size() == 5);
    const int64_t batch = std::stoll(rows[i][0]);
    const double peak = std::stod(rows[i][1]);
    CHECK(batch == (int64_t{64} << (i - 1)));  // a power of two, doubling from train.batch_size
    CHECK(rows[i][3] == "1");
    CHECK(std::stod(rows[i][2]) == allowance);
    CHECK(peak > 0);
    CHECK(peak <= allowance);
    previous_peak = peak;
  }
  CHECK(previous_peak > first_peak);  // 512 samples' activations against 64's
  // The trials ran on the GPU: each one's report.toml names it, and the allowance is
  // (1 - headroom 0.1) x that GPU's memory.
  std::vector<fs::path> scratch;
  for (const auto& entry : fs::directory_iterator(dir / "tune"))
    if (entry.is_directory() && entry.path().filename().string().rfind("batch-", 0) == 0) scratch.push_back(entry.path());
  REQUIRE(scratch.size() == 1);
  for (const int batch : {64, 128, 256, 512}) {
    CAPTURE(batch);
    const toml::table report = tp::gpu_test::read_toml(scratch[0] / ("b" + std::to_string(batch)) / "report.toml");
    CHECK(tp::gpu_test::toml_string(report, "device") == "cuda:0");
    const double total_mb = tp::gpu_test::toml_number(report, "device_total_mb");
    CHECK(total_mb > 8000);
    CHECK(allowance == doctest::Approx(0.9 * total_mb).epsilon(1e-9));
  }
  MESSAGE("host tune batch-size on CUDA: allowance " << allowance << " MB, peak at 512: " << previous_peak << " MB");
}

TEST_CASE("host predict on CUDA writes the CPU's predictions of the same checkpoint (to rounding)") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  // To rounding: host predict applies run.tf32 (false here) as training does (assemble_run). The
  // logits are compared to 1e-2, set when predict left TF32 at LibTorch's default (allowed for
  // cuDNN: 10-bit mantissa, ~1e-3 relative per product); kept until a GPU run measures the rest.
  const fs::path dir = tp::test::fresh_dir("gpu_predict");
  const auto train = tp::test::run_host("--output-dir '" + dir.string() + "' " + kSmall);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  for (const std::string device : {"cuda", "cpu"}) {
    const auto run = tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kSmall +
                                        "--set run.device=\"" + device + "\" --checkpoint last --split val --format csv "
                                        "--output '" + (dir / (device + ".csv")).string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.output, "for 203 samples of the val split"));
  }
  const auto gpu = tp::test::read_csv(dir / "cuda.csv");
  const auto cpu = tp::test::read_csv(dir / "cpu.csv");
  REQUIRE(gpu.size() == 204);
  REQUIRE(cpu.size() == gpu.size());
  REQUIRE(gpu[0] == cpu[0]);
  const auto& header = gpu[0];
  REQUIRE(column(header, "index") == 0);
  REQUIRE(column(header, "logits.0") >= 0);
  REQUIRE(column(header, "logits.argmax") >= 0);
  REQUIRE(column(header, "label") >= 0);
  double worst = 0;
  int argmax_differs = 0;
  for (std::size_t r = 1; r < gpu.size(); ++r) {
    REQUIRE(gpu[r].size() == header.size());
    REQUIRE(cpu[r].size() == header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
      const std::string& name = header[c];
      if (name == "index" || name == "label") {
        CHECK(gpu[r][c] == cpu[r][c]);  // dataset order and the samples' own fields
      } else if (name.size() > 7 && name.compare(name.size() - 7, 7, ".argmax") == 0) {
        argmax_differs += gpu[r][c] != cpu[r][c];
      } else {
        const double a = std::stod(gpu[r][c]), b = std::stod(cpu[r][c]);
        CAPTURE(name);
        CAPTURE(r);
        CHECK(std::isfinite(a));
        const double difference = std::abs(a - b) / std::max(1.0, std::abs(b));
        worst = std::max(worst, difference);
        CHECK(difference <= 1e-2);
      }
    }
  }
  MESSAGE("host predict, CUDA vs CPU: largest difference " << worst << " (relative above 1), " << argmax_differs
                                                           << " of 203 argmax differ");
  CHECK(argmax_differs <= 2);  // only a near-tie may flip
}
