// org.torchhost.resnet in the real host: configs/resnet18.toml starts from weights Python saved
// the way torchvision weights are saved (torch.save(model.state_dict()), an OrderedDict with
// _metadata) through train.init_weights, strict by name and shape; one optimizer step and one
// evaluation batch (train.fast_dev_run) on small images. The same file refused for a model of
// another shape names the mismatching tensor; with train.init_weights_ignore = ["fc.*"] a head of
// another class count keeps its own init.
#include <doctest/doctest.h>

#include <string>

#include "integration/host_runner.h"
#include "support/test_paths.h"

namespace {

using namespace tp::test;

/// configs/resnet18.toml shrunk to seconds: fast_dev_run, 32x32 images, no loader thread.
const std::string kSmall =
    "--set train.fast_dev_run=true --set train.batch_size=4 --set data.num_workers=0 --set data.train.size=8 "
    "--set data.train.val_size=4 --set data.train.image_size=32 --set 'progress.mode=\"off\"'";

}  // namespace

TEST_CASE("resnet18 starts from a torchvision-style state_dict through train.init_weights") {
  const auto dir = fresh_dir("zoo_resnet_host");
  const auto weights = dir / "resnet18_3.pt";
  const HostRun saved = run_shell(std::string("'") + tp::test::python() + "' tests/plugins/models/resnet_reference.py torchvision '" +
                                  weights.string() + "'");
  INFO(saved.output);
  REQUIRE(saved.exit_code == 0);

  const std::string init = " --set 'train.init_weights=\"" + weights.string() + "\"' ";
  const HostRun run = run_host("--config configs/resnet18.toml --output-dir '" + (dir / "run").string() + "'" + init + kSmall);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("initial weights from") != std::string::npos);

  const HostRun gray = run_host("--config configs/resnet18.toml --output-dir '" + (dir / "gray").string() + "'" + init +
                                kSmall + " --set model.in_channels=1");
  INFO(gray.output);
  CHECK(gray.exit_code == 2);
  CHECK(gray.output.find("'conv1.weight' [64, 3, 7, 7] in the file, [64, 1, 7, 7] in the model") != std::string::npos);

  // Fine-tuning to 5 classes: the 3-class fc stays out (train.init_weights_ignore), the rest loads.
  const HostRun five = run_host("--config configs/resnet18.toml --output-dir '" + (dir / "five").string() + "'" + init +
                                kSmall + " --set model.num_classes=5 --set 'train.init_weights_ignore=[\"fc.*\"]'");
  INFO(five.output);
  CHECK(five.exit_code == 0);
  CHECK(five.output.find("120 tensors loaded; the model's own init kept for 2 (fc.weight, fc.bias); 2 entries of the "
                         "file left out") != std::string::npos);
}

// Migration trial F9: timm's --drop-path for ResNet. A run with model.drop_path_rate trains; resumed
// from a mid-epoch step checkpoint (into another run directory) it ends with the same weights and CPU
// generator bit for bit, since the masks come from the host-seeded generator the checkpoint keeps;
// the masks change training (a rate-0 run ends elsewhere); and evaluating the final weights
// with the rate set or 0 gives the same metrics (eval mode draws no masks).
TEST_CASE("resnet18 with model.drop_path_rate trains, resumes bit for bit, and evaluates as without it") {
  const auto dir = fresh_dir("zoo_resnet_drop_path");
  const std::string sets =
      " --set train.batch_size=8 --set data.num_workers=0 --set data.train.size=48 --set data.train.val_size=16 "
      "--set data.train.image_size=32 --set 'progress.mode=\"off\"' --set train.epochs=2 "
      "--set model.zero_init_residual=false --set 'checkpoint.strategy=\"steps\"' --set checkpoint.every=4 "
      "--set checkpoint.keep_last=5 ";
  const auto run = [&](const std::string& name, const std::string& more) {
    const HostRun r = run_host("--config configs/resnet18.toml --output-dir '" + (dir / name).string() + "'" + sets + more);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  run("straight", "--set model.drop_path_rate=0.3");  // 6 steps an epoch, 12 in all
  const HostRun resumed = run("resumed", "--set model.drop_path_rate=0.3 --resume '" +
                                             (dir / "straight/checkpoints/step-00000004.pt").string() + "'");
  CHECK(contains(resumed.output, "resumed at epoch 1, batch 4, step 4"));
  run("rate0", "--set model.drop_path_rate=0.0");

  const auto compare = [&](const std::string& a, const std::string& b) {
    const HostRun r = run_shell(std::string("'") + tp::test::python() + "' tests/plugins/models/resnet_reference.py compare '" +
                                (dir / a / "checkpoints/last.pt").string() + "' '" +
                                (dir / b / "checkpoints/last.pt").string() + "'");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return r.output;
  };
  CHECK(contains(compare("straight", "resumed"), "model 0 of 122 differ; rng_cpu same"));
  CHECK_FALSE(contains(compare("straight", "rate0"), "model 0 of 122"));

  const auto evaluate = [&](const std::string& more, const std::string& out) {
    const HostRun r = run_host("eval --config '" + (dir / "straight/config.toml").string() + "' --checkpoint last --output '" +
                               (dir / out).string() + "'" + more);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string json = read_text(dir / out);
    return json.substr(json.find("\"val/loss\""));
  };
  CHECK(evaluate("", "eval_rate.json") == evaluate(" --set model.drop_path_rate=0.0", "eval_rate0.json"));
}
