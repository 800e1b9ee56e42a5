// The DDP oracle: the host's 2-rank training against PyTorch's own DistributedDataParallel
// (tests/integration_oracle/ddp_oracle.py under torchrun, Gloo), from the same initial weights.
//
// Python saves the MLP's initial weights; the host starts from them through train.init_weights
// and runs 2 ranks with its launcher. Both sides read the plain-C regression fixture in the
// host sampler's order (a shuffled permutation per epoch, padded, rank r reads positions
// r, r + 2, ...; ddp_oracle.py reimplements it), 16 samples per rank and step, 3 epochs of 251
// samples: 8 steps per epoch, the last one of 14 samples per rank and one padded sample on
// rank 1. Python's DDP averages the ranks' mean-loss gradients; the host divides the summed
// item losses by the global item count. Both clip (max_grad_norm 0.5, which triggers) and step
// SGD (momentum, weight decay) and AdamW.
//
// Tolerance 1e-5 relative: both sides do the same fp32 arithmetic up to the order of sums (the
// MSE sum vs mean, Gloo's sum vs the reducer's, the clip norm), each ~1e-7 relative per step;
// over 24 steps these stay near 1e-6 (measured: see MESSAGE output). A real difference, one
// sample in the wrong rank, a gradient not averaged or a missed clip, moves the loss by > 1e-3.
#include <sstream>
#include <string>

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

constexpr double kTolerance = 1e-5;
constexpr int kDdpOracleSteps = 3 * 8;  // epochs x ceil(ceil(251 / 2) / 16)

// Settings of each optimizer; trajectory_oracle.py's OPTIMIZERS repeats them.
const std::pair<const char*, const char*> kOptimizers[] = {
    {"sgd", "--set optim.name=sgd --set optim.lr=0.05 --set optim.momentum=0.9 --set optim.weight_decay=0.01"},
    {"adamw", "--set optim.name=adamw --set optim.lr=0.01 --set 'optim.betas=[0.9, 0.999]' --set optim.eps=1e-8 "
              "--set optim.weight_decay=0.1"},
};

const std::string kScript = "tests/integration_oracle/ddp_oracle.py";

}  // namespace

TEST_CASE("2 host ranks follow PyTorch's DistributedDataParallel step for step (SGD, AdamW)") {
  const std::filesystem::path python = tp::test::python();
  const auto torchrun = python.parent_path() / "torchrun";
  REQUIRE_MESSAGE(std::filesystem::exists(torchrun), "the DDP oracle needs the project venv: " << torchrun);
  const auto dir = tp::test::fresh_dir("ddp_oracle");
  const auto init = tp::test::run_shell("'" + python.string() + "' " + kScript + " init '" + dir.string() + "'");
  INFO(init.output);
  REQUIRE(init.exit_code == 0);

  for (const auto& [optimizer, sets] : kOptimizers) {
    const auto host = tp::test::run_host(
        "--nproc-per-node 2 train --config tests/dist/ddp_oracle.toml --plugin-dir '" +
        std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + (dir / optimizer).string() +
        "' --set 'train.init_weights=\"" + (dir / "init.pt").string() + "\"' " + sets);
    INFO(optimizer, ":\n", host.output);
    REQUIRE(host.exit_code == 0);
  }

  // --standalone: torchrun picks a free port; OMP_NUM_THREADS=1 is torchrun's default anyway.
  const auto oracle = tp::test::run_shell("OMP_NUM_THREADS=1 '" + torchrun.string() +
                                          "' --standalone --nproc-per-node 2 " + kScript + " compare '" +
                                          dir.string() + "'");
  INFO(oracle.output);
  REQUIRE(oracle.exit_code == 0);
  std::istringstream lines(oracle.output);
  int diffs = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string tag, optimizer;
    in >> tag >> optimizer;
    INFO(line);
    if (tag == "diff") {
      std::string what, text;
      in >> what >> text;
      const double value = std::stod(text); // "inf" when the step counts differ
      MESSAGE("DDP oracle: host vs torch DDP, " << optimizer << " " << what << ": max relative difference " << value);
      CHECK(value <= kTolerance);
      ++diffs;
    } else if (tag == "steps") {
      int host_steps = 0, python_steps = 0;
      in >> host_steps >> python_steps;
      CHECK(host_steps == kDdpOracleSteps);
      CHECK(python_steps == kDdpOracleSteps);
    } else if (tag == "moved") {
      std::string text;
      in >> text;
      const double moved = std::stod(text);
      CHECK(moved > 1e-2);  // the weights really trained: the comparison is not of untouched models
    }
  }
  CHECK(diffs == 2 * 2);  // optimizers x (loss, weights)
}
