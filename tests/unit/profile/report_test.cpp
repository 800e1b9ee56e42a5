// The pieces of the reports that do not need a model: quantiles as numpy.percentile computes
// them (linear interpolation), latency summaries, and the training report's history values
// (perf/tflops = forward FLOPs per sample x samples/s x 3).
#include "profile_test_util.h"

#include <cmath>

#include "tp/framework/profile/latency.h"
#include "tp/framework/profile/profile_report.h"
#include "tp/framework/profile/training_report.h"

namespace {

using namespace tp;

TEST_CASE("quantile interpolates linearly between ranks, as numpy.percentile does") {
  const std::vector<double> sorted{1.0, 2.0, 3.0, 4.0};
  CHECK(quantile(sorted, 0.0) == 1.0);
  CHECK(quantile(sorted, 1.0) == 4.0);
  CHECK(quantile(sorted, 0.5) == doctest::Approx(2.5));  // numpy.percentile([1,2,3,4], 50)
  CHECK(quantile(sorted, 0.9) == doctest::Approx(3.7));  // numpy.percentile([1,2,3,4], 90)
  CHECK(quantile({5.0}, 0.99) == 5.0);
  const LatencyStats s = summarize({4.0, 1.0, 3.0, 2.0});
  CHECK(s.iterations == 4);
  CHECK(s.mean_ms == doctest::Approx(2.5));
  CHECK(s.p99_ms == doctest::Approx(3.97));
  CHECK(s.min_ms == 1.0);
  CHECK(s.max_ms == 4.0);
}

TEST_CASE("measure_latency runs warm-up plus timed iterations") {
  int calls = 0;
  const LatencyStats s = measure_latency([&] { ++calls; }, c10::Device(c10::kCPU), 3, 7);
  CHECK(calls == 10);
  CHECK(s.iterations == 7);
  CHECK(s.min_ms >= 0.0);
  CHECK_THROWS(measure_latency([] {}, c10::Device(c10::kCPU), 0, 0));
}

TEST_CASE("training report: phase times, peak memory and TFLOP/s in the log values") {
  TrainingReport report{c10::Device(c10::kCPU)};
  CHECK_FALSE(report.has_flops());
  report.set_forward_flops(8'000'000, 8);  // 1 MFLOP per sample
  for (int step = 0; step < 2; ++step) {
    report.begin_window(false);  // CPU: timed regardless
    report.add_batch(0.001, 8);
    for (StepPhase phase : {StepPhase::kForward, StepPhase::kBackward, StepPhase::kOptimizer}) {
      report.begin(phase);
      at::mm(at::rand({64, 64}), at::rand({64, 64}));
      report.end(phase);
    }
  }
  const auto values = report.log_values(/*samples_per_s=*/1000.0);
  std::map<std::string, double> by_name(values.begin(), values.end());
  for (const char* key : {"time/forward_s", "time/backward_s", "time/optimizer_s", "memory/peak_mb", "perf/tflops"}) {
    INFO(key);
    REQUIRE(by_name.count(key) == 1);
    CHECK(by_name[key] > 0.0);
  }
  CHECK(by_name["perf/tflops"] == doctest::Approx(1e6 * 1000.0 * 3.0 / 1e12));
  const std::string line = report.summary(2, 0.5);
  for (const char* part : {"ms/step", "forward", "backward", "optimizer", "samples/s", "peak memory", "TFLOP/s"})
    CHECK_MESSAGE(line.find(part) != std::string::npos, part << " in " << line);
}

TEST_CASE("training report: on CPU the split averages every measured step, a run with no log step too") {
  // Soak trial F6: 12 steps under log_every_steps = 50 reported forward_ms = 0.
  TrainingReport report{c10::Device(c10::kCPU)};
  for (int step = 0; step < 3; ++step) {
    report.begin_window(false);
    for (StepPhase phase : {StepPhase::kForward, StepPhase::kBackward, StepPhase::kOptimizer}) {
      report.begin(phase);
      at::mm(at::rand({256, 256}), at::rand({256, 256}));  // well over the 0.05 ms that prints as 0.0
      report.end(phase);
    }
  }
  const std::string toml = report.to_toml({1, 3, 0.1}, 3, 0.1);
  for (const char* key : {"forward_ms = ", "backward_ms = ", "optimizer_ms = "}) {
    const auto at = toml.find(key);
    REQUIRE_MESSAGE(at != std::string::npos, key << " in " << toml);
    CHECK_MESSAGE(std::stod(toml.substr(at + std::string(key).size())) > 0.0, key << " in " << toml);
  }
  CHECK_MESSAGE(report.summary(3, 0.1).find("forward 0.0,") == std::string::npos, report.summary(3, 0.1));
}

TEST_CASE("si_number") {
  CHECK(si_number(1.814e9) == "1.81 G");
  CHECK(si_number(56675) == "56.7 k");
  CHECK(si_number(12) == "12");
}

}  // namespace
