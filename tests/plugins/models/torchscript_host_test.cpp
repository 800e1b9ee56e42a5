// The acceptance test of org.torchhost.torchscript: Python scripts an MLP (with BatchNorm, so the
// host's train/eval switch matters) and saves m.pt; `host train` trains it on the plain-C
// regression fixture (torchscript_train.toml, copied beside m.pt so `path` is relative to it); `host export` writes the trained weights as
// safetensors; Python loads m.pt again, loads those weights by the scripted module's own names
// (load_state_dict, strict) and evaluates on the same "val" split the host evaluated on.
//
// Asserted: the host's losses fall (train/loss and val/loss, every epoch, and by half), the trained
// module's outputs differ from the initial module's, and Python's val loss of the trained module
// equals the host's last val/loss within 1e-5 relative. Both compute float32 forward passes of
// the same batches of 32 with the same LibTorch (the venv's) and add per-batch sums in float64,
// so they differ by summation order inside a batch at most: float32 rounding over 32 terms is
// below 32 * 6e-8 = 2e-6 relative; 1e-5 leaves margin for BLAS blocking and still fails for any
// wrong weight, a wrong split or eval done in training mode (BatchNorm batch statistics).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "integration/history_reader.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

namespace {

using namespace tp::test;

const char* const kScript = "tests/plugins/models/torchscript_oracle.py";

std::string python(const std::string& args) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()), "the oracle needs the project venv: " << tp::test::python());
  const HostRun run = run_shell(std::string("'") + tp::test::python() + "' " + kScript + " " + args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return run.output;
}

}  // namespace

TEST_CASE("a scripted MLP trained by the host: losses fall, Python reproduces the host's val loss") {
  const auto dir = fresh_dir("zoo_torchscript_host");
  python("script '" + dir.string() + "'");
  const auto run_dir = dir / "run";
  // The config sits beside mlp.pt and names it relatively (path = "mlp.pt"); run_host() starts the
  // host in the source tree, so the file is found only if `path` is taken from the config's
  // directory (TP_CFG_PATH).
  std::filesystem::copy_file(std::string(tp::test::source_dir()) + "/tests/plugins/models/torchscript_train.toml", dir / "run.toml");
  const HostRun train = run_host("--config '" + (dir / "run.toml").string() + "' --plugin-dir '" +
                                 std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + run_dir.string() + "'");
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  // Without the sanity check the first evaluation comes after training calls, under the host's
  // InferenceMode: the profiling executor's graph, specialised for autograd, failed there with
  // "Inference tensors cannot be saved for backward" (data trial F23).
  const HostRun unchecked = run_host("--config '" + (dir / "run.toml").string() + "' --plugin-dir '" +
                                     std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" +
                                     (dir / "run_unchecked").string() + "' --set eval.sanity_batches=0 --set train.epochs=2");
  INFO(unchecked.output);
  CHECK(unchecked.exit_code == 0);

  const auto epochs = rows_of(read_history(run_dir), "epoch");
  REQUIRE(epochs.size() == 4);
  for (const std::string key : {"train/loss", "val/loss"}) {
    CAPTURE(key);
    std::string trace;
    for (size_t i = 0; i < epochs.size(); ++i) {
      REQUIRE(epochs[i].has(key));
      trace += (i ? " " : "") + std::to_string(epochs[i].values.at(key));
      if (i > 0) CHECK(epochs[i].values.at(key) < epochs[i - 1].values.at(key));  // every epoch lower
    }
    MESSAGE("host " << key << " per epoch: " << trace);
    CHECK(epochs.back().values.at(key) < 0.5 * epochs.front().values.at(key));
  }

  const auto weights = dir / "trained.safetensors";
  const HostRun exported = run_host("export --checkpoint '" + (run_dir / "checkpoints" / "last.pt").string() +
                                    "' --format safetensors --output '" + weights.string() + "'");
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);

  std::map<std::string, double> values;
  std::istringstream lines(python("check '" + dir.string() + "' '" + weights.string() + "'"));
  for (std::string name; lines >> name;) lines >> values[name];
  REQUIRE(values.count("trained_val_loss") == 1);
  const double host = epochs.back().values.at("val/loss");
  const double relative = std::abs(values.at("trained_val_loss") - host) / host;
  MESSAGE("val loss: host " << host << ", python " << values.at("trained_val_loss") << " (relative difference "
                            << relative << "); initial model " << values.at("initial_val_loss")
                            << "; largest output change " << values.at("max_output_change"));
  CHECK(relative <= 1e-5);
  CHECK(values.at("max_output_change") > 1e-3);
  CHECK(values.at("trained_val_loss") < values.at("initial_val_loss"));
}
