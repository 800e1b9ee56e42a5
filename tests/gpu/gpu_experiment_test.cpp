// The precision experiment's CUDA cells (docs/experiments.md, "The precision experiment";
// configs/precision_experiment.toml, its CUDA command): fp32, bf16 and fp16, each with batch 64 and
// with 4 micro-batches of 16, through `host sweep` and its `host compare`. Every cell's numbers are
// there, the cells agree on what must not depend on the precision, and the accuracies are close.
#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "experiments/experiment_helpers.h"
#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using tp::gpu_test::kNeedsCuda;
using tp::test::column;

namespace {

std::string unquoted(std::string text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
  return text;
}

double number(const std::string& cell) {
  REQUIRE_MESSAGE(!cell.empty(), "an empty cell in comparison.csv");
  return std::stod(cell);
}

}  // namespace

TEST_CASE("the precision experiment on CUDA: six cells, each numeric, accuracies close across precisions") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const auto dir = tp::test::fresh_dir("gpu_precision_experiment");
  // The config header's CUDA command (4 loader workers instead of 1: on a GPU one thread rendering
  // the shapes would be the bottleneck; plots off in the cells, the comparison still draws its own).
  const auto run = tp::test::run_host(
      "sweep --config configs/precision_experiment.toml --set run.device=\"cuda\" --set progress.mode=\"off\" "
      "--set data.num_workers=4 --set plots.enabled=false --grid amp.precision=fp32,bf16,fp16 "
      "--grid 'train.batch_size+train.grad_accum_steps=[64,1],[16,4]' --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(std::filesystem::exists(dir / "comparison.md"));

  const auto rows = tp::test::read_csv(dir / "comparison.csv");
  REQUIRE(rows.size() == 7);  // the header and six cells
  const auto& header = rows[0];
  const int precision = column(header, "amp.precision"), accum = column(header, "train.grad_accum_steps");
  const int batch = column(header, "train.batch_size"), accuracy = column(header, "final val/accuracy");
  const int epochs = column(header, "epochs"), steps = column(header, "steps");
  const int peak = column(header, "peak_device_mb"), wall = column(header, "wall_s");
  REQUIRE(precision >= 0);
  REQUIRE(accum >= 0);
  REQUIRE(batch >= 0);
  REQUIRE(accuracy >= 0);
  REQUIRE(epochs >= 0);
  REQUIRE(steps >= 0);
  REQUIRE(peak >= 0);
  REQUIRE(wall >= 0);

  std::map<std::pair<std::string, int>, double> final_accuracy, peak_mb;  // (precision, accumulation)
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    REQUIRE(row.size() == header.size());
    CAPTURE(row[0]);
    const std::string p = unquoted(row[precision]);
    const int a = static_cast<int>(number(row[accum]));
    CHECK(number(row[batch]) * a == 64);  // the effective batch of every cell
    const double acc = number(row[accuracy]);
    CHECK(std::isfinite(acc));
    CHECK(acc > 0.45);  // three classes: chance is 0.33; the CPU cells reach 0.68-0.73
    CHECK(acc <= 1.0);
    CHECK(number(row[epochs]) == 3);
    // 6000 / 64 = 93 full batches (drop_last); 375 micro-batches of 16 make 94 windows.
    CHECK(number(row[steps]) == (a == 1 ? 279 : 282));
    CHECK(number(row[peak]) > 0);
    CHECK(number(row[wall]) > 0);
    final_accuracy[{p, a}] = acc;
    peak_mb[{p, a}] = number(row[peak]);
  }
  REQUIRE(final_accuracy.size() == 6);
  for (const int a : {1, 4}) {
    CAPTURE(a);
    REQUIRE(final_accuracy.count({"fp32", a}) == 1);
    const double reference = final_accuracy[{"fp32", a}];
    for (const std::string p : {"bf16", "fp16"}) {
      CAPTURE(p);
      REQUIRE(final_accuracy.count({p, a}) == 1);
      MESSAGE(p << " x accumulation " << a << ": val/accuracy " << final_accuracy[{p, a}] << " (fp32 " << reference
                << "), peak " << peak_mb[{p, a}] << " MB (fp32 " << peak_mb[{"fp32", a}] << ")");
      // One seed, a short run: rounding alone moves the accuracy by a few points (the CPU cells
      // spread over 0.05); a broken precision would fall towards chance.
      CHECK(std::abs(final_accuracy[{p, a}] - reference) <= 0.12);
    }
  }
  // A quarter of the activations per forward should lower the allocator's peak in every precision;
  // reported, not required: small_cnn's activations are a few MB, of the size of the cuDNN
  // workspaces the allocator also counts, which the convolution algorithm picks per batch size.
  for (const std::string p : {"fp32", "bf16", "fp16"}) {
    CAPTURE(p);
    WARN(peak_mb[{p, 4}] < peak_mb[{p, 1}]);
  }
}
