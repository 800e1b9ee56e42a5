// The real `host` executable: `host profile` prints the table and writes profile.json (checked
// in Python), falls back to dataset samples when the declared examples do not fit the config, and
// `host train` logs the training report (step split, peak memory, TFLOP/s) in history.jsonl and
// an end-of-run summary.
#include "profile_test_util.h"

#include "integration/history_reader.h"
#include "integration/host_runner.h"

namespace {

using namespace tp;

constexpr const char* kConfig = R"(
[run]
seed = 3
device = "cpu"
threads = 1

[train]
epochs = 1
batch_size = 16
log_every_steps = 2

[data]
num_workers = 0

[data.train]
component = "org.torchhost.shapes"
size = 64
val_size = 16

[model]
component = "org.torchhost.small_cnn"
num_classes = 3

[loss]
component = "org.torchhost.cross_entropy"
)";

std::filesystem::path write_config(const std::filesystem::path& dir, const std::string& extra = "") {
  const auto file = dir / "run.toml";
  std::ofstream(file) << kConfig << extra << "\n";
  return file;
}

TEST_CASE("host profile prints the report and writes a consistent profile.json") {
  const auto dir = test::fresh_dir("host_profile");
  const auto config = write_config(dir);
  const auto json = dir / "out" / "profile.json";
  const auto run = test::run_host("profile --config '" + config.string() + "' --output-dir '" + dir.string() +
                                  "' --batch-size 8 --precisions fp32,bf16 --iterations 4 --warmup 1 --output '" +
                                  json.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const char* part : {"org.torchhost.small_cnn", "parameters", "FLOPs", "latency", "fp32", "bf16", "written to"})
    CHECK(run.output.find(part) != std::string::npos);
  REQUIRE(std::filesystem::exists(json));
  CHECK(test::run_python("check_profile_json.py", "'" + json.string() + "' 56675 8").find("ok") != std::string::npos);
  CHECK(test::read_text(json).find("\"input_source\":\"examples\"") != std::string::npos);
}

TEST_CASE("host profile uses the dataset's samples when the examples do not fit the configuration") {
  const auto dir = test::fresh_dir("host_profile_dataset");
  // small_cnn at image_size 64 refuses its declared 32x32 example; the shapes data is rendered at 64.
  std::string text = kConfig;
  text.replace(text.find("num_classes = 3\n"), 16, "num_classes = 3\nimage_size = 64\n");
  text.replace(text.find("val_size = 16\n"), 14, "val_size = 16\nimage_size = 64\n");
  const auto config = dir / "run.toml";
  std::ofstream(config) << text;
  const auto run = test::run_host("profile --config '" + config.string() + "' --output-dir '" + dir.string() +
                                  "' --batch-size 2 --iterations 2 --warmup 0");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string json = test::read_text(dir / "profile.json");
  CHECK(json.find("\"input_source\":\"dataset\"") != std::string::npos);
  CHECK(json.find("\"image\":[2,3,64,64]") != std::string::npos);
}

TEST_CASE("host profile: a --devices entry this host lacks gets not-run rows, the others still run (docs trial F10)") {
  // cuda:99 is missing on every machine: a CPU-only host sees no CUDA device, a GPU host fewer GPUs.
  const auto dir = test::fresh_dir("host_profile_missing_device");
  const auto config = write_config(dir);
  const auto json = dir / "profile.json";
  const auto run = test::run_host("profile --config '" + config.string() + "' --output-dir '" + dir.string() +
                                  "' --batch-size 8 --precisions fp32,bf16 --iterations 2 --warmup 0 --devices cpu,cuda:99");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("cuda:99  fp32  not run: ") != std::string::npos);
  CHECK(run.output.find("cuda:99  bf16  not run: ") != std::string::npos);
  CHECK(run.output.find("run.device") == std::string::npos); // the user set --devices, not run.device
  REQUIRE(std::filesystem::exists(json));
  CHECK(test::run_python("check_profile_json.py", "'" + json.string() + "' 56675 8 2").find("ok") != std::string::npos);
  const std::string text = test::read_text(json);
  CHECK(text.find("{\"device\":\"cpu\",\"precision\":\"bf16\",\"iterations\":2") != std::string::npos);
  CHECK(text.find("{\"device\":\"cuda:99\",\"precision\":\"fp32\",\"error\":\"") != std::string::npos);

  // Nothing that can run: a configuration error naming --devices, nothing written.
  const auto none = test::run_host("profile --config '" + config.string() + "' --output-dir '" + (dir / "none").string() +
                                   "' --iterations 2 --warmup 0 --devices cuda:99");
  INFO(none.output);
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("none of --devices cuda:99 can run on this host") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "none" / "profile.json"));
}

TEST_CASE("host profile refuses bad options with exit code 2") {
  const auto dir = test::fresh_dir("host_profile_usage");
  const auto config = write_config(dir);
  CHECK(test::run_host("profile --config '" + config.string() + "' --iterations 0").exit_code == 2);
  CHECK(test::run_host("profile --config '" + config.string() + "' --precisions fp8").exit_code == 2);
}

TEST_CASE("host train logs the step split, peak memory and TFLOP/s, and prints a summary") {
  const auto dir = test::fresh_dir("train_report");
  const auto config = write_config(dir);
  const auto run = test::run_host("train --config '" + config.string() + "' --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  int step_rows = 0;
  for (const auto& row : test::read_history(dir)) {
    if (row.kind != "step") continue;
    ++step_rows;
    for (const char* key : {"time/forward_s", "time/backward_s", "time/optimizer_s", "memory/peak_mb", "perf/tflops"}) {
      INFO(key);
      REQUIRE(row.has(key));
      CHECK(row.values.at(key) > 0.0);
    }
    // The split is part of the step: forward + backward + optimizer fit inside the wall time.
    CHECK(row.values.at("time/forward_s") + row.values.at("time/backward_s") + row.values.at("time/optimizer_s") <=
          row.values.at("time/step_s") * 1.0001);
  }
  CHECK(step_rows == 2);
  const std::string log = test::read_text(dir / "train.log");
  CHECK(log.find("training report:") != std::string::npos);
  CHECK(log.find("TFLOP/s") != std::string::npos);
}

}  // namespace
