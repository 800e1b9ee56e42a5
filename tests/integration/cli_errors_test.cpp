// The host as a user meets it: exit codes and one-paragraph errors for bad input, and
// `host plugins list|check` over the built-in plugins.
#include <filesystem>
#include <fstream>
#include <string>

#include <ATen/ATen.h>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"
#include "tp/version.h"

#include <torch/version.h>

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::contains;

std::string write_config(const std::string& name, const std::string& text) {
  const auto dir = tp::test::fresh_dir(name);
  const auto file = dir / "run.toml";
  std::ofstream(file) << text;
  return file.string();
}

const char* kGoodTables = R"(
[data.train]
component = "org.torchhost.shapes"
[model]
component = "org.torchhost.small_cnn"
[loss]
component = "org.torchhost.cross_entropy"
)";

}  // namespace

TEST_CASE("a typo in a host key exits 2 with the closest valid key") {
  const auto file = write_config("typo", std::string("[train]\nbatch_sise = 8\n") + kGoodTables);
  const auto run = tp::test::run_host("--config '" + file + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "batch_sise"));
  CHECK(contains(run.output, "train.batch_size"));
  CHECK(contains(run.output, "run.toml:2"));
}

TEST_CASE("a wrong type in a plugin table exits 2 naming the component, key and line") {
  const auto file = write_config("plugin_type",
                                 "[data.train]\ncomponent = \"org.torchhost.shapes\"\n"
                                 "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n"
                                 "[model]\ncomponent = \"org.torchhost.small_cnn\"\nwidth = \"wide\"\n");
  const auto run = tp::test::run_host("--config '" + file + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "width"));
  CHECK(contains(run.output, "org.torchhost.small_cnn"));
  CHECK(contains(run.output, "run.toml:7"));
}

TEST_CASE("an unknown component id exits 2 with a did-you-mean") {
  const auto run = tp::test::run_host("--config configs/quickstart.toml --set model.component=\"org.torchhost.smal_cnn\"");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "org.torchhost.small_cnn"));
}

TEST_CASE("components no loaded plugin provides are listed all at once, with --plugin-dir and plugins.dirs") {
  const auto dir = tp::test::fresh_dir("missing_components");
  const auto file = write_config("missing_components",
                                 "[data.train]\ncomponent = \"org.example.squares\"\n"
                                 "[model]\ncomponent = \"org.example.quadratic\"\n"
                                 "[loss]\ncomponent = \"org.torchhost.mse\"\n"
                                 "[[metrics]]\ncomponent = \"org.example.mean_error\"\n");
  const auto run = tp::test::run_host("--config '" + file + "' --output-dir '" + (dir / "run").string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitConfig);
  CHECK(contains(run.output, "host: configuration error: 3 components of the run are not loaded: "
                             "model.component = \"org.example.quadratic\" (a model), "
                             "data.train.component = \"org.example.squares\" (a dataset), "
                             "metrics[0].component = \"org.example.mean_error\" (a metric). "
                             "No plugin on the search path provides them (the loaded plugins come from "));
  CHECK(contains(run.output, "If they are in a plugin you built, add its directory: `--plugin-dir DIR` on the command "
                             "line, or `[plugins] dirs = [\"DIR\"]` in the config (or TORCHHOST_PLUGIN_PATH)"));
  CHECK_FALSE(std::filesystem::exists(dir / "run"));
  // One missing component: the same advice, in the singular, with a did-you-mean where one is close.
  const auto one = tp::test::run_host("--config configs/quickstart.toml --set model.component=\"org.torchhost.smal_cnn\"");
  INFO(one.output);
  CHECK(one.exit_code == tp::kExitConfig);
  CHECK(contains(one.output, "a component of the run is not loaded: model.component = \"org.torchhost.smal_cnn\" (a "
                             "model; did you mean 'org.torchhost.small_cnn'?). No plugin on the search path provides "
                             "it"));
  CHECK(contains(one.output, "If it is in a plugin you built, add its directory: `--plugin-dir DIR`"));
}

// Security trial F7: the id reached the terminal raw, so ESC[2J cleared it and a newline forged a line.
TEST_CASE("a component id holding ESC or a newline is shown escaped in the not-loaded error") {
  const auto run =
      tp::test::run_host("--config configs/quickstart.toml --set 'model.component=\"org.x\\u001b[2J\\nFAKE\"'");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitConfig);
  CHECK(contains(run.output, "model.component = \"org.x\\u001B[2J\\u000AFAKE\" (a model"));
  CHECK(run.output.find('\x1b') == std::string::npos);
  CHECK(run.output.find("\nFAKE") == std::string::npos);
}

TEST_CASE("a --set with the wrong type exits 2 naming the override") {
  const auto run = tp::test::run_host("--config configs/quickstart.toml --set train.epochs=many");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "train.epochs"));
}

TEST_CASE("a malformed value of a kind exits 2 when the config is loaded, before the run directory exists") {
  // train.max_time used to be parsed by the trainer, after config.toml, train.log and the
  // components were made; now every value kind is parsed with the config (docs/config_keys.md).
  for (const std::string set : {"train.max_time=abc", "amp.precision=fp61", "run.device=gpu"}) {
    CAPTURE(set);
    const auto dir = tp::test::fresh_dir("bad_kind");
    const auto run = tp::test::run_host("train --config configs/quickstart.toml --set " + set + " --output-dir '" +
                                        (dir / "run").string() + "'");
    INFO(run.output);
    CHECK(run.exit_code == 2);
    const std::string key = set.substr(0, set.find('='));
    CHECK(contains(run.output, key + ": got \"" + set.substr(set.find('=') + 1) + "\", which is not"));
    CHECK(contains(run.output, "e.g. " + key + " = "));
    CHECK_FALSE(std::filesystem::exists(dir / "run"));
  }
}

TEST_CASE("a batch larger than the training split is refused before training, not trained for 0 steps") {
  // It used to train 0 steps, write best.pt and last.pt and exit 0 (issue 41, item 14).
  const auto dir = tp::test::fresh_dir("batch_over_split");
  const auto run = tp::test::run_host("--config configs/quickstart.toml --set data.train.size=100 "
                                      "--set train.batch_size=128 --set progress.mode=\"off\" --output-dir '" +
                                      dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(contains(run.output, "train.batch_size = 128 on 1 rank(s), but the training split has"));
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "last.pt"));
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "best.pt"));
}

TEST_CASE("an unusable --output-dir is a configuration error naming it, not an unexpected error") {
  const auto dir = tp::test::fresh_dir("unusable_output");
  std::ofstream(dir / "a_file") << "not a directory";
  for (const std::filesystem::path& output : {dir / "a_file", dir / "a_file" / "run"}) {
    const auto run = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + output.string() + "'");
    INFO(run.output);
    CHECK(run.exit_code == 2);
    CHECK(contains(run.output, "cannot use " + output.string() + " as the run directory"));
    CHECK_FALSE(contains(run.output, "unexpected error"));
  }
  CHECK(tp::test::read_text(dir / "a_file") == "not a directory");
}

TEST_CASE("a missing config file and a missing plugin dir fail with distinct codes") {
  const auto missing = tp::test::run_host("--config no/such/file.toml");
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.output, "no/such/file.toml"));
  const auto bad_dir = tp::test::run_host("--config configs/quickstart.toml --plugin-dir /no/such/plugins");
  CHECK(bad_dir.exit_code == 3);
  CHECK(contains(bad_dir.output, "/no/such/plugins"));
  const auto usage = tp::test::run_host("frobnicate");
  CHECK(usage.exit_code == 2);
  CHECK(contains(usage.output, "usage:"));
}

// A deployment trial found no way to tell which build made a binary or which plugin ABI it speaks.
TEST_CASE("host --version names the build, the plugin ABI and the LibTorch it was built with") {
  const auto run = tp::test::run_host("--version");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(tp::test::contains(run.output, "torchhost "));
  CHECK(tp::test::contains(run.output, "plugin ABI " + std::to_string(TP_ABI_MAJOR) + "." + std::to_string(TP_ABI_MINOR)));
  CHECK(tp::test::contains(run.output, std::string("LibTorch ") + TORCH_VERSION));
}

TEST_CASE("plugins list shows every built-in component with its schema") {
  const auto run = tp::test::run_host("plugins list --verbose");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const char* id : {"org.torchhost.shapes", "org.torchhost.mlp", "org.torchhost.small_cnn",
                         "org.torchhost.multi_head_cnn", "org.torchhost.two_stream", "org.torchhost.cross_entropy",
                         "org.torchhost.mse", "org.torchhost.smooth_l1", "org.torchhost.weighted_sum",
                         "org.torchhost.bce_with_logits", "org.torchhost.accuracy", "org.torchhost.f1",
                         "org.torchhost.iou", "org.torchhost.mae", "org.torchhost.multilabel"})
    CHECK_MESSAGE(contains(run.output, id), id);
  CHECK(contains(run.output, "image_size")); // a schema key of shapes, shown by --verbose
}

TEST_CASE("plugins list goes on past a file that does not load, lists it with why, and exits 3") {
  // A run refuses such a file (every .so on the path is loaded); the listing is where the user
  // finds it, so it must not stop at it as the run does.
  const std::string bad_dir = std::string(tp::test::bad_plugin_dir()) + "/abi_major";
  const auto run = tp::test::run_host("plugins list --plugin-dir '" + bad_dir + "'");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitPlugin);
  CHECK(contains(run.output, "org.torchhost.cross_entropy")); // the built-in plugins still listed
  CHECK(contains(run.output, "files that do not load"));
  CHECK(contains(run.output, bad_dir + "/abi_major.so"));
  CHECK(contains(run.output, "ABI 2.0"));
  const auto train = tp::test::run_host("--config '" + write_config("list_bad_run", kGoodTables) + "' --plugin-dir '" +
                                        bad_dir + "'");
  CHECK(train.exit_code == tp::kExitPlugin);
  CHECK(contains(train.output, "Every .so in a plugin directory is loaded"));
}

TEST_CASE("plugins check passes on every built-in plugin library") {
  const auto dir = std::filesystem::path(tp::test::plugin_dir());
  int checked = 0;
  for (const auto& item : std::filesystem::directory_iterator(dir)) {
    if (item.path().extension() != ".so") continue;
    const auto run = tp::test::run_host("plugins check '" + item.path().string() + "'");
    INFO(run.output);
    CHECK_MESSAGE(run.exit_code == 0, item.path().string());
    CHECK(!contains(run.output, "[FAIL]"));
    ++checked;
  }
  CHECK(checked >= 4);
}

TEST_CASE("a non-finite loss stops with the step named, or is skipped with nan_policy = skip") {
  const std::string args = "--config tests/integration/c_regression.toml --plugin-dir '" +
                           std::string(tp::test::fixture_plugin_dir()) + "' --set progress.mode=\"off\" "
                           "--set train.epochs=2 --set optim.name=\"sgd\" --set optim.lr=1e30 ";
  const auto stop = tp::test::run_host(args + "--output-dir '" + tp::test::fresh_dir("nan_stop").string() + "'");
  INFO(stop.output);
  CHECK(stop.exit_code == 1);
  CHECK(contains(stop.output, "non-finite"));
  CHECK(contains(stop.output, "at step "));
  CHECK(contains(stop.output, "nan_policy"));
  const auto skip = tp::test::run_host(args + "--set train.nan_policy=\"skip\" --output-dir '" +
                                       tp::test::fresh_dir("nan_skip").string() + "'");
  INFO(skip.output);
  CHECK(skip.exit_code == 0);
  CHECK(contains(skip.output, "skipping this optimizer step"));
  CHECK(contains(skip.output, "steps skipped for a non-finite loss"));
}

TEST_CASE("nan_policy = skip puts back the BatchNorm statistics the skipped step's forward moved") {
  // Migration trial F3: the skipped step's training-mode forward wrote NaN running statistics,
  // which no update check saw; the run then refused its checkpoint, blaming train.init_weights.
  // verify_data's sample 5 holds a NaN: the step whose batch holds it is skipped.
  const auto dir = tp::test::fresh_dir("nan_skip_buffers");
  const auto run = tp::test::run_host(
      "--config tests/verify/fixture.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
      "' --set data.train.defect=\"nan_sample\" --set model.batch_norm=true --set train.nan_policy=\"skip\" "
      "--set eval.strategy=\"no\" --set checkpoint.save_top_k=0 --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.output, "1 steps skipped for a non-finite loss"));
  CHECK(!contains(run.output, "not saving the checkpoint"));
  // 256 samples in 16 steps: the 15 that trained counted their batch, the skipped one not, and
  // the statistics are those the 15 left (finite).
  const tp::LoadedCheckpoint saved = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  bool counted = false;
  for (const auto& [name, tensor] : saved.model) {
    CAPTURE(name);
    CHECK(at::isfinite(tensor.to(at::kDouble)).all().item<bool>());
    if (name == "norm.num_batches_tracked") {
      counted = true;
      CHECK(tensor.item<int64_t>() == 15);
    }
  }
  CHECK(counted);
}

TEST_CASE("a diverging run saves no inf/NaN weights: the error names the step, the finite checkpoints stay") {
  // The lr jumps from 0.01 to 1e38 after step 3 (multistep), so the update of step 4 turns
  // finite weights into inf while the loss it came from was finite: the loss checks alone let
  // step 4's checkpoint (last.pt among its names) be written with them. A checkpoint every step,
  // with an EMA that must not fold them in either.
  const auto dir = tp::test::fresh_dir("diverge_no_poison");
  const auto run = tp::test::run_host(
      "--config tests/integration/c_regression.toml --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) +
      "' --set progress.mode=\"off\" --set train.epochs=1 --set optim.name=\"sgd\" --set optim.lr=0.01 "
      "--set schedule.name=\"multistep\" --set schedule.milestones=[3] --set schedule.gamma=1e40 "
      "--set checkpoint.strategy=\"steps\" --set checkpoint.every=1 --set checkpoint.keep_last=10 "
      "--set ema.enabled=true --output-dir '" + dir.string() + "'");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(contains(run.output, "not saving the checkpoint of step 4"));
  CHECK(contains(run.output, "the update of step 4 left them non-finite"));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "checkpoints")) {
    if (entry.path().extension() != ".pt") continue;
    ++files;
    const tp::LoadedCheckpoint saved = tp::load_checkpoint(entry.path());
    CAPTURE(entry.path().string());
    CHECK(saved.step <= 3);
    for (const auto& [name, tensor] : saved.model) CHECK_MESSAGE(tensor.isfinite().all().item<bool>(), name);
    for (const auto& average : saved.averages)
      for (const auto& [name, tensor] : average.weights) CHECK_MESSAGE(tensor.isfinite().all().item<bool>(), average.name << "/" << name);
  }
  CHECK(files >= 2); // last.pt and step-N.pt of steps 1-3
  CHECK(tp::load_checkpoint(dir / "checkpoints" / "last.pt").step == 3);
}

TEST_CASE("fp16: a loss non-finite in the forward stops the run under nan_policy = stop") {
  // Before, fp16 left every non-finite value to the grad scaler, which skipped every step to the
  // end of the run (exit 0, nothing trained).
  const std::string args = "--config tests/integration/c_regression.toml --plugin-dir '" +
                           std::string(tp::test::fixture_plugin_dir()) + "' --set progress.mode=\"off\" "
                           "--set optim.name=\"sgd\" --set optim.lr=1e30 --set amp.precision=\"fp16\" ";
  const auto stop = tp::test::run_host(args + "--set train.epochs=2 --output-dir '" +
                                       tp::test::fresh_dir("nan_stop_fp16").string() + "'");
  INFO(stop.output);
  CHECK(stop.exit_code == 1);
  CHECK(contains(stop.output, "non-finite"));
  CHECK(contains(stop.output, "at step "));
  // Long enough for more skips than scaler_skip_warning_threshold (20).
  const auto skip = tp::test::run_host(args + "--set train.epochs=8 --set train.nan_policy=\"skip\" --output-dir '" +
                                       tp::test::fresh_dir("nan_skip_fp16").string() + "'");
  INFO(skip.output);
  CHECK(skip.exit_code == 0); // "skip" stays the scaler's: it skips, and says how many it skipped
  CHECK(contains(skip.output, "the fp16 grad scaler skipped"));
  CHECK(contains(skip.output, "more than a scale that settles skips"));
}

TEST_CASE("a plugin directory others can write is refused unless --allow-insecure-plugin-dir") {
  const auto dir = tp::test::fresh_dir("insecure_plugin_dir");
  std::filesystem::copy_file(std::string(tp::test::fixture_plugin_dir()) + "/c_dataset.so", dir / "c_dataset.so");
  std::filesystem::permissions(dir, std::filesystem::perms::others_write, std::filesystem::perm_options::add);
  const std::string args = "--config tests/integration/c_regression.toml --set progress.mode=\"off\" "
                           "--set train.epochs=1 --output-dir '" + (dir / "run").string() + "' --plugin-dir '" +
                           dir.string() + "'";
  const auto refused = tp::test::run_host(args);
  CHECK(refused.exit_code == 3);
  CHECK(refused.output.find("refusing to load plugins from " + dir.string()) != std::string::npos);
  CHECK(refused.output.find("writable by every user") != std::string::npos);
  CHECK(refused.output.find("--allow-insecure-plugin-dir") != std::string::npos);
  const auto allowed = tp::test::run_host(args + " --allow-insecure-plugin-dir");
  INFO(allowed.output);
  CHECK(allowed.exit_code == 0);
  // A group-writable plugin file in a safe directory is refused as well.
  std::filesystem::permissions(dir, std::filesystem::perms::others_write, std::filesystem::perm_options::remove);
  std::filesystem::permissions(dir / "c_dataset.so", std::filesystem::perms::group_write,
                               std::filesystem::perm_options::add);
  const auto file_refused = tp::test::run_host(args);
  CHECK(file_refused.exit_code == 3);
  CHECK(file_refused.output.find("c_dataset.so: it is writable by its group") != std::string::npos);
}

// Issue 58, item 14: a safe plugin directory inside a world-writable, non-sticky one loaded
// without a word, though anyone could rename it away and put their own in its place.
TEST_CASE("a plugin directory under a parent others can write is refused; a sticky parent is fine") {
  const auto parent = tp::test::fresh_dir("insecure_plugin_parent");
  const auto dir = parent / "plugins";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(tp::test::fixture_plugin_dir()) + "/c_dataset.so", dir / "c_dataset.so");
  std::filesystem::permissions(parent, std::filesystem::perms::all);  // 0777, no sticky bit
  const std::string args = "plugins list --plugin-dir '" + dir.string() + "'";
  const auto refused = tp::test::run_host(args);
  INFO(refused.output);
  CHECK(refused.exit_code == 3);
  CHECK(refused.output.find("lies in " + parent.string() + ", which is writable by every user without the sticky bit") !=
        std::string::npos);
  CHECK(tp::test::run_host(args + " --allow-insecure-plugin-dir").exit_code == 0);
  std::filesystem::permissions(parent, std::filesystem::perms::sticky_bit, std::filesystem::perm_options::add);
  const auto sticky = tp::test::run_host(args);
  INFO(sticky.output);
  CHECK(sticky.exit_code == 0);
}
