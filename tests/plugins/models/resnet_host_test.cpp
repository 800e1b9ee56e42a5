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
