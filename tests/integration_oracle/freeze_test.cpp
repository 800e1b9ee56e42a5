// [[optim.param_groups]] freeze = true, unfreeze_at_epoch = K (docs/optimizers.md): frozen
// parameters get no gradient, no update and no weight decay until epoch K, then train; a run
// resumed across the unfreeze ends bitwise equal to the straight run. The other fine-tuning
// controls end to end: model.freeze_bn_stats and optim.layer_decay (its values against timm:
// tests/plugins/models/layer_decay_oracle.py).
#include <ATen/ATen.h>

#include <fstream>
#include <set>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

const std::string kFreezeArgs = "--config tests/integration_oracle/freeze.toml ";

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

/// freeze.toml without its [[optim.param_groups]] rule (`--set` cannot remove a table array),
/// written into `dir`; returns the arguments that run it.
std::string without_rules(const std::filesystem::path& dir) {
  std::string text = tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / "tests/integration_oracle/freeze.toml");
  const auto start = text.find("[[optim.param_groups]]");
  text.erase(start, text.find("[data]") - start);
  std::ofstream(dir / "no_rules.toml") << text;
  return "--config '" + (dir / "no_rules.toml").string() + "' ";
}

}  // namespace

TEST_CASE("a frozen parameter group stays bitwise unchanged until its unfreeze epoch, then trains") {
  const auto dir = tp::test::fresh_dir("freeze_straight");
  const auto run = tp::test::run_host(kFreezeArgs + "--output-dir '" + dir.string() + "'");
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
  const auto resumed = tp::test::run_host(kFreezeArgs + "--output-dir '" + resumed_dir.string() + "' --resume '" +
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
  std::string text = tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / "tests/integration_oracle/freeze.toml");
  text.replace(text.find("freeze = true\n"), 14, "");
  std::ofstream(dir / "bad.toml") << text;
  const auto run = tp::test::run_host("--config '" + (dir / "bad.toml").string() + "' --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("optim.param_groups[0].unfreeze_at_epoch") != std::string::npos);
}

TEST_CASE("frozen groups that match every parameter are a configuration error naming the setting") {
  // Before: host train crashed in the first backward on LibTorch's "element 0 of tensors does not
  // require grad", exit 1 (found while checking train.init_weights on timm files).
  const auto dir = tp::test::fresh_dir("freeze_everything");
  std::string text = tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / "tests/integration_oracle/freeze.toml");
  text.replace(text.find("pattern = \"trunk.*\""), 19, "pattern = \"*\"");
  std::ofstream(dir / "all.toml") << text;
  const auto run = tp::test::run_host("--config '" + (dir / "all.toml").string() + "' --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("with freeze = true match every parameter of the model") != std::string::npos);
  CHECK(run.output.find("does not require grad") == std::string::npos);
}

TEST_CASE("model.freeze_bn_stats: the trunk trains while its BatchNorm statistics stay as initialised") {
  const auto dir = tp::test::fresh_dir("freeze_bn_stats");
  const std::string args = without_rules(dir);
  const auto run = tp::test::run_host(args + "--output-dir '" + dir.string() +
                                      "' --set train.epochs=1 --set model.freeze_bn_stats=true");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(tp::test::read_text(dir / "train.log").find("freeze_bn_stats: the model's BatchNorm layers") != std::string::npos);
  const auto last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  int statistics = 0;
  for (const auto& [name, tensor] : last.model) {
    CAPTURE(name);
    if (name.ends_with("running_mean")) CHECK(at::equal(tensor, at::zeros_like(tensor)));
    if (name.ends_with("running_var")) CHECK(at::equal(tensor, at::ones_like(tensor)));
    if (name.ends_with("num_batches_tracked")) CHECK(tensor.item<int64_t>() == 0);
    statistics += name.ends_with("running_mean") || name.ends_with("running_var");
    if (name == "trunk.bn1.weight") CHECK_FALSE(at::equal(tensor, at::ones_like(tensor))); // its affine part trains
  }
  CHECK(statistics == 6);

  // With swa.update_bn, which would recompute them, it is refused by name.
  const auto both = tp::test::run_host(args + "--output-dir '" + (dir / "both").string() +
                                       "' --set model.freeze_bn_stats=true --set swa.enabled=true");
  INFO(both.output);
  CHECK(both.exit_code == 2);
  CHECK(both.output.find("model.freeze_bn_stats") != std::string::npos);
  CHECK(both.output.find("swa.update_bn") != std::string::npos);
}

TEST_CASE("a parameter group's freeze_bn_stats keeps the statistics of the BatchNorm layers it matches only") {
  // A frozen teacher inside the model (distillation/SSL trial F2): its layers keep their loaded
  // statistics while the rest of the model's BatchNorm layers train as usual.
  const auto dir = tp::test::fresh_dir("freeze_bn_rule");
  const std::string args = without_rules(dir);
  std::ofstream(dir / "no_rules.toml", std::ios::app)
      << "\n[[optim.param_groups]]\npattern = \"trunk.bn1.*\"\nfreeze = true\nfreeze_bn_stats = true\n";
  const auto run = tp::test::run_host(args + "--output-dir '" + dir.string() + "' --set train.epochs=1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(tp::test::read_text(dir / "train.log").find("freeze_bn_stats: 1 BatchNorm layer (trunk.bn1)") != std::string::npos);
  const auto last = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  int kept = 0, trained = 0;
  for (const auto& [name, tensor] : last.model) {
    CAPTURE(name);
    if (name == "trunk.bn1.running_mean") kept += at::equal(tensor, at::zeros_like(tensor));
    if (name == "trunk.bn1.running_var") kept += at::equal(tensor, at::ones_like(tensor));
    if (name == "trunk.bn1.num_batches_tracked") kept += tensor.item<int64_t>() == 0;
    if (name == "trunk.bn1.weight") kept += at::equal(tensor, at::ones_like(tensor));  // frozen by the same rule
    if (name == "trunk.bn2.running_mean") trained += !at::equal(tensor, at::zeros_like(tensor));
    if (name == "trunk.bn2.num_batches_tracked") trained += tensor.item<int64_t>() > 0;
  }
  CHECK(kept == 4);
  CHECK(trained == 2);

  // A rule that only keeps statistics takes no parameter from the rules around it: after a rule
  // giving the trunk its own lr, or before it, trunk.bn1 keeps its statistics and the run trains.
  for (const bool statistics_first : {false, true}) {
    CAPTURE(statistics_first);
    const std::string lr_rule = "[[optim.param_groups]]\npattern = \"trunk.*\"\nlr = 0.001\n";
    const std::string bn_rule = "[[optim.param_groups]]\npattern = \"trunk.bn1.*\"\nfreeze_bn_stats = true\n";
    std::string text = tp::test::read_text(dir / "no_rules.toml");
    text.erase(text.find("\n[[optim.param_groups]]"));
    const auto ordered = dir / (statistics_first ? "bn_first.toml" : "lr_first.toml");
    std::ofstream(ordered) << text << "\n" << (statistics_first ? bn_rule + lr_rule : lr_rule + bn_rule);
    const auto out = dir / (statistics_first ? "bn_first" : "lr_first");
    const auto both_rules = tp::test::run_host("--config '" + ordered.string() + "' --output-dir '" + out.string() +
                                               "' --set train.epochs=1");
    INFO(both_rules.output);
    REQUIRE(both_rules.exit_code == 0);
    for (const auto& [name, tensor] : tp::load_checkpoint(out / "checkpoints" / "last.pt").model)
      if (name == "trunk.bn1.running_mean") CHECK(at::equal(tensor, at::zeros_like(tensor)));
  }

  // A pattern that matches no BatchNorm layer is refused, naming the rule's key.
  std::string text = tp::test::read_text(dir / "no_rules.toml");
  text.replace(text.find("trunk.bn1.*"), std::string("trunk.bn1.*").size(), "head.*");
  std::ofstream(dir / "head.toml") << text;
  const auto none = tp::test::run_host("--config '" + (dir / "head.toml").string() + "' --output-dir '" +
                                       (dir / "none").string() + "' --set train.epochs=1");
  INFO(none.output);
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("optim.param_groups[0] has freeze_bn_stats = true, but its pattern 'head.*' matches no "
                         "BatchNorm layer") != std::string::npos);
}

TEST_CASE("optim.layer_decay: the history's per-group lrs are optim.lr x 0.5^(3 - depth) for small_cnn's declared depths") {
  // small_cnn declares trunk blocks 1-3 at depths 0-2; the head is depth 3 (full lr). freeze.toml's
  // frozen trunk rule keeps its own groups, split by depth the same way.
  const auto dir = tp::test::fresh_dir("layer_decay_run");
  const auto run = tp::test::run_host(kFreezeArgs + "--output-dir '" + dir.string() +
                                      "' --set train.epochs=1 --set optim.layer_decay=0.5");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(tp::test::read_text(dir / "train.log").find("optim.layer_decay = 0.5: ") != std::string::npos);
  const auto steps = tp::test::rows_of(tp::test::read_history(dir), "step");
  REQUIRE_FALSE(steps.empty());
  std::set<double> scales;
  for (const auto& [key, value] : steps.front().values)
    if (key.starts_with("lr/group")) scales.insert(value / steps.front().values.at("lr"));
  CHECK(scales == std::set<double>{0.125, 0.25, 0.5, 1.0});
}
