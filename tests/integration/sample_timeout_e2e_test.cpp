// data.sample_timeout_s through `host train`: a sample whose read takes 20 s (the prepare_probe
// fixture's stall_index) against a 0.5 s limit, with two loader threads. "fail" ends the run
// naming the sample and the key, without waiting for the read; "skip" trains without it and says
// so at the end of the epoch.
#include <chrono>
#include <filesystem>
#include <string>

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

tp::test::HostRun train_with_stall(const std::string& name, const std::string& extra) {
  const std::filesystem::path dir = tp::test::fresh_dir(name);
  return tp::test::run_host("train --config tests/predict/prepare_probe.toml --plugin-dir '" +
                            std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                            "' --set 'data.train.log=\"" + (dir / "calls.log").string() +
                            "\"' --set data.num_workers=2 --set data.sample_timeout_s=0.5 "
                            "--set data.train.stall_index=5 --set data.train.stall_ms=20000 " + extra);
}

}  // namespace

TEST_CASE("data.sample_timeout_s: fail ends the run naming the sample; skip trains without it") {
  const auto start = std::chrono::steady_clock::now();
  const auto failed = train_with_stall("sample_timeout_fail", "");
  INFO(failed.output);
  CHECK(failed.exit_code != 0);
  CHECK(failed.output.find("sample 5 did not load within data.sample_timeout_s = 0.5 s") != std::string::npos);
  CHECK(failed.output.find("org.torchhost.test.prepare_probe") != std::string::npos);
  CHECK(failed.output.find("set data.on_bad_sample = \"skip\"") != std::string::npos);

  const auto skipped = train_with_stall("sample_timeout_skip", "--set data.on_bad_sample=\"skip\" --set eval.strategy=\"no\"");
  INFO(skipped.output);
  CHECK(skipped.exit_code == 0);
  CHECK(skipped.output.find("sample 5 did not load within data.sample_timeout_s = 0.5 s") != std::string::npos);
  // Neither run waited for the 20 s read.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(19));
}
