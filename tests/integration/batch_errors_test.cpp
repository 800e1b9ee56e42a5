// Issue 28, a newcomer's first hour: a model or loss that fails on a batch says which component,
// which phase and which fields it received (name, dtype, shape), through `host` end to end, on the
// `host plugins check` fixtures (tests/fixtures/check_plugins): ck_float_label gives its label
// as float32, ck_good as int64.
#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/error.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::contains;

// A run of org.torchhost.mlp over x float32[4] of the fixture `name`, batches of 8, with `model`
// keys; cross_entropy reads "logits" and "label" (its defaults).
// The sanity check is off (`sanity` false), so the failure is the training step's, as these tests
// mean; with it on, its evaluation meets the batch first.
tp::test::HostRun train_on_fixture(const std::string& name, const std::string& model_keys,
                                   const std::filesystem::path& run_dir, bool sanity = false) {
  const auto config = run_dir.parent_path() / (run_dir.filename().string() + ".toml");
  std::ofstream(config) << "[run]\ndevice = \"cpu\"\n[train]\nepochs = 1\nbatch_size = 8\n[progress]\nmode = \"off\"\n"
                           "[eval]\nsanity_batches = " + std::string(sanity ? "2" : "0") + "\n"
                           "[data]\nnum_workers = 0\n[data.train]\ncomponent = \"org.test." + name + "\"\n"
                           "[model]\ncomponent = \"org.torchhost.mlp\"\ninput = \"x\"\nhidden = []\nnum_classes = 3\n" +
                               model_keys + "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n";
  return tp::test::run_host("--config '" + config.string() + "' --plugin-dir '" + tp::test::check_plugin_dir() + "/" + name +
                            "' --output-dir '" + run_dir.string() + "'");
}

}  // namespace

TEST_CASE("a float32 label fails the first step naming the loss, the field's dtype and shape, and the batch") {
  const auto run_dir = tp::test::fresh_dir("batch_error_float_label") / "run";
  const auto run = train_on_fixture("ck_float_label", "in_features = 4\n", run_dir);
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitRuntime);
  CHECK(contains(run.output, "host: error: plugin component 'org.torchhost.cross_entropy' (basic_losses.so) failed "
                             "in forward with TP_ERR_INVALID_ARGUMENT: target 'label' float32[8]: class indices need "
                             "an integer dtype (int64). Give the dataset's field 'label' as int64"));
  CHECK(contains(run.output, "In the loss's forward of training step 1 (epoch 1, batch 1), which received outputs: "
                             "logits float32[8, 3]; targets: x float32[8, 4], label float32[8]. Check that these "
                             "names, dtypes and shapes are what the loss expects: the keys of [loss]"));
  // The run directory holds what a run that stopped before its first save holds: no checkpoint.
  CHECK(std::filesystem::exists(run_dir / "config.toml"));
  CHECK_FALSE(std::filesystem::exists(run_dir / "checkpoints" / "last.pt"));
  // And its log says why it ended (a run under nohup has no terminal to show it).
  CHECK(contains(tp::test::read_text(run_dir / "train.log"),
                 "[host] error: plugin component 'org.torchhost.cross_entropy' (basic_losses.so) failed in forward"));
  // With the sanity check (the default), its evaluation meets the batch before any step, and says so.
  const auto sane = train_on_fixture("ck_float_label", "in_features = 4\n", tp::test::fresh_dir("batch_error_sanity") / "run", true);
  INFO(sane.output);
  CHECK(sane.exit_code == tp::kExitRuntime);
  CHECK(contains(sane.output, "In the loss's forward of the sanity check's evaluation before training "
                              "(eval.sanity_batches = 0 skips it) (batch 1), which received outputs: logits float32[8, 3]"));
}

TEST_CASE("a wrong input width names the model, the step and its input fields, with the model's message and no "
          "backtrace") {
  const auto run_dir = tp::test::fresh_dir("batch_error_width") / "run";
  const auto run = train_on_fixture("ck_good", "in_features = 3\n", run_dir);
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitRuntime);
  CHECK(contains(run.output, "plugin component 'org.torchhost.mlp' (vision_models.so) failed in forward"));
  CHECK(contains(run.output, "input 'x': expected floating [B, ...] with 3 features per sample, got Float [8, 4]"));
  CHECK(contains(run.output, "In the model's forward of training step 1 (epoch 1, batch 1), which received inputs: "
                             "x float32[8, 4], label int64[8]. Check that these names, dtypes and shapes are what "
                             "the model expects: the keys of [model] name the fields it reads"));
  CHECK_FALSE(contains(run.output, "Exception raised from"));
  CHECK_FALSE(contains(run.output, "frame #"));
}
