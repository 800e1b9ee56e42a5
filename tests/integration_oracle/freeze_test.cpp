// [[optim.param_groups]] freeze = true, unfreeze_at_epoch = K (docs/optimizers.md): frozen
// parameters get no gradient, no update and no weight decay until epoch K, then train; a run
// resumed across the unfreeze ends bitwise equal to the straight run.
#include <ATen/ATen.h>

#include <fstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/host_runner.h"

#include <doctest/doctest.h>

namespace {

const std::string kArgs = "--config tests/integration_oracle/freeze.toml ";

/// The parameters (not the BatchNorm statistics, which a frozen trunk still updates) under `prefix`.
bool same_parameters(const tp::LoadedCheckpoint& a, const tp::LoadedCheckpoint& b, const std::string& prefix) {
  bool same = true;
  for (std::size_t i = 0; i < a.model.size(); ++i) {
    const std::string& name = a.model[i].first;
    if (!name.starts_with(prefix) || name.ends_with("running_mean") || name.ends_with("running_var") ||
        name.ends_with("num_batches_tracked"))
      continue;
    same = same && at::equal(a.model[i].second, b.model[i].second);
  }
  return same;
}

}  // namespace

TEST_CASE("a frozen parameter group stays bitwise unchanged until its unfreeze epoch, then trains") {
  const auto dir = tp::test::fresh_dir("freeze_straight");
  const auto run = tp::test::run_host(kArgs + "--output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("epoch 3: frozen parameter groups start training") != std::string::npos);
  const auto e1 = tp::load_checkpoint(dir / "checkpoints" / "step-00000050.pt");
  const auto e2 = tp::load_checkpoint(dir / "checkpoints" / "step-00000100.pt");
  const auto e3 = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  REQUIRE(e3.step == 150);
  CHECK(same_parameters(e1, e2, "trunk."));       // frozen: no update, no weight decay
  CHECK_FALSE(same_parameters(e1, e2, "head."));  // the rest trains
  CHECK_FALSE(same_parameters(e2, e3, "trunk.")); // unfrozen at epoch 3

  // Resumed at the start of epoch 3, across the unfreeze: the same end.
  const auto resumed_dir = tp::test::fresh_dir("freeze_resumed");
  const auto resumed = tp::test::run_host(kArgs + "--output-dir '" + resumed_dir.string() + "' --resume '" +
                                          (dir / "checkpoints" / "step-00000100.pt").string() + "'");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const auto r3 = tp::load_checkpoint(resumed_dir / "checkpoints" / "last.pt");
  REQUIRE(r3.model.size() == e3.model.size());
  for (std::size_t i = 0; i < e3.model.size(); ++i) {
    INFO(e3.model[i].first);
    CHECK(at::equal(e3.model[i].second, r3.model[i].second));
  }
}

TEST_CASE("unfreeze_at_epoch without freeze is a configuration error naming the key") {
  const auto dir = tp::test::fresh_dir("freeze_bad");
  std::string text = tp::test::read_text(std::filesystem::path(TP_TEST_SOURCE_DIR) / "tests/integration_oracle/freeze.toml");
  text.replace(text.find("freeze = true\n"), 14, "");
  std::ofstream(dir / "bad.toml") << text;
  const auto run = tp::test::run_host("--config '" + (dir / "bad.toml").string() + "' --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("optim.param_groups[0].unfreeze_at_epoch") != std::string::npos);
}
