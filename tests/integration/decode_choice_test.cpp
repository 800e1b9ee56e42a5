// data.decode as a user without a GPU meets it (docs/datasets.md, "Decoding on the GPU"): "gpu"
// that cannot apply stops at start-up with exit 2 naming every reason and its key, before a step;
// "auto" trains on the CPU path and says why in the log and runtime.toml; "cpu" adds nothing. The
// GPU side (nvJPEG, the pixels against the CPU path's, hostile files, a training) is
// tests/gpu/gpu_decode_test.cpp.
#include <toml++/toml.h>

#include <filesystem>
#include <string>

#include "data/device_decode/image_decode_stage.h"  // gpu_decoder_missing: whether this build has the decoder
#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::contains;

const std::string kDecodeQuickstart = "--config configs/quickstart.toml --set progress.mode=\"off\" "
                                      "--set plots.enabled=false --set train.max_steps=2 --set eval.strategy=\"no\" ";

}  // namespace

TEST_CASE("data.decode = \"gpu\" where it cannot apply exits 2 naming every reason and its key") {
  const auto dir = tp::test::fresh_dir("decode_gpu_refused");
  const auto run = tp::test::run_host(kDecodeQuickstart + "--set data.decode=\"gpu\" --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "data.decode = \"gpu\" cannot decode the train split's images on the device"));
  CHECK(contains(run.output, "[run.device]"));  // this CPU build trains on the CPU
  // Every reason, the build's too (before, only the device was named; docs/datasets.md promises
  // all of them in one paragraph).
  const std::string unbuilt = tp::gpu_decoder_missing();
  if (!unbuilt.empty()) CHECK(contains(run.output, unbuilt + " [data.decode]"));
  CHECK(contains(run.output, "; nothing was trained (docs/datasets.md"));
  // The quickstart's shapes dataset renders its images: it has no files to hand over (ABI 1.11).
  CHECK(contains(run.output, "org.torchhost.shapes (train) cannot hand its images over encoded"));
  CHECK(contains(run.output, "[data.train]"));
  CHECK(contains(run.output, "data.decode = \"auto\""));
  CHECK(tp::test::read_text(dir / "history.jsonl").empty());  // refused before the first step
}

TEST_CASE("host eval refuses data.decode = \"gpu\" with every reason and words that fit evaluation") {
  // Before, the refusal ended with "nothing was trained": wrong for a command that trains nothing.
  const auto dir = tp::test::fresh_dir("decode_gpu_eval");
  const auto train = tp::test::run_host(kDecodeQuickstart + "--output-dir '" + dir.string() + "'");
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const auto eval = tp::test::run_host("eval --config '" + (dir / "config.toml").string() + "' --output-dir '" +
                                       dir.string() + "' --checkpoint last --set data.decode=\"gpu\"");
  INFO(eval.output);
  CHECK(eval.exit_code == 2);
  CHECK(contains(eval.output, "data.decode = \"gpu\" cannot decode the val split's images on the device"));
  CHECK(contains(eval.output, "[run.device]"));
  const std::string unbuilt = tp::gpu_decoder_missing();
  if (!unbuilt.empty()) CHECK(contains(eval.output, unbuilt));
  CHECK(contains(eval.output, "nothing was evaluated"));
  CHECK_FALSE(contains(eval.output, "trained"));
}

TEST_CASE("data.decode = \"auto\" trains on the CPU path and says why; \"cpu\" records nothing") {
  const auto dir = tp::test::fresh_dir("decode_auto_cpu");
  const auto run = tp::test::run_host(kDecodeQuickstart + "--set data.decode=\"auto\" --output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const toml::table runtime = toml::parse_file((dir / "runtime.toml").string());
  const toml::table* decode = runtime["decode"].as_table();
  REQUIRE_MESSAGE(decode != nullptr, tp::test::read_text(dir / "runtime.toml"));
  CHECK((*decode)["mode"].value_or(std::string()) == "auto");
  const std::string train = (*decode)["train"].value_or(std::string());
  CHECK(train.rfind("cpu: ", 0) == 0);
  CHECK(contains(train, "[run.device]"));
  CHECK(contains(run.output, "data.decode: train cpu: "));

  const auto plain = tp::test::fresh_dir("decode_cpu");
  const auto cpu = tp::test::run_host(kDecodeQuickstart + "--output-dir '" + plain.string() + "'");
  INFO(cpu.output);
  REQUIRE(cpu.exit_code == 0);
  CHECK_FALSE(contains(tp::test::read_text(plain / "runtime.toml"), "[decode]"));
  const auto typo = tp::test::run_host(kDecodeQuickstart + "--set data.decode=\"nvjpeg\" --output-dir '" + plain.string() + "'");
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.output, "data.decode"));
}
