// The trajectory oracle: the real `host train` against a plain PyTorch loop
// (trajectory_oracle.py, run with tp::test::python()), from the same initial weights.
//
// Python builds the MLP, seeds it and saves its state_dict; every host run starts from it through
// train.init_weights. The data is the plain-C regression fixture in file order, which Python
// reimplements bit for bit. For SGD (momentum, weight decay) and AdamW, with max_grad_norm
// clipping on (the Python side counts the steps it clipped), the runs are
//   a      batch 32 x grad_accum 1, implementation "for_loop"
//   b      batch 8 x grad_accum 4: the same 32 samples per optimizer step
//   fused  as a, implementation "fused"
// and Python trains with torch.optim (loop, and fused=True for the fused run) + clip_grad_norm_
// on the mean loss over each 32 items. The per-step training loss of history.jsonl and the final
// weights of checkpoints/last.pt must agree within 1e-5 relative, and so must every step's
// train/grad_norm (before clipping) and train/clipped_fraction with clip_grad_norm_'s.
#include <map>
#include <sstream>
#include <string>

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

constexpr double kTolerance = 1e-5;
constexpr int kTrajectoryOracleSteps = 3 * 256 / 32;  // epochs x size / 32, as in trajectory.toml

const char* const kScript = "tests/integration_oracle/trajectory_oracle.py";

// Settings of each optimizer; trajectory_oracle.py's OPTIMIZERS repeats them.
const std::map<std::string, std::string> kOptimizers = {
    {"sgd", "--set optim.name=sgd --set optim.lr=0.05 --set optim.momentum=0.9 --set optim.weight_decay=0.01"},
    {"adamw", "--set optim.name=adamw --set optim.lr=0.01 --set 'optim.betas=[0.9, 0.999]' --set optim.eps=1e-8 "
              "--set optim.weight_decay=0.1"},
};

const std::map<std::string, std::string> kRuns = {
    {"a", "--set train.batch_size=32 --set train.grad_accum_steps=1"},
    {"b", "--set train.batch_size=8 --set train.grad_accum_steps=4"},
    {"fused", "--set train.batch_size=32 --set train.grad_accum_steps=1 --set optim.implementation=fused"},
};

// The scheduled comparison (trajectory_oracle.py's SCHEDULED repeats them): every optimizer with a
// fused kernel, fused, 7 epochs (56 steps) of a cosine schedule that changes the lr every step.
const std::map<std::string, std::string> kScheduledOptimizers = {
    {"sgd", kOptimizers.at("sgd")},
    {"sgd_nesterov", "--set optim.name=sgd --set optim.lr=0.05 --set optim.momentum=0.9 --set optim.nesterov=true "
                     "--set optim.weight_decay=0.01"},
    {"adam", "--set optim.name=adam --set optim.lr=0.01 --set 'optim.betas=[0.9, 0.999]' --set optim.eps=1e-8 "
             "--set optim.weight_decay=0.01"},
    {"adamw", kOptimizers.at("adamw")},
};
constexpr int kScheduledSteps = 7 * 256 / 32;
const char* const kScheduledSets =
    "--set train.epochs=7 --set 'schedule.name=\"cosine\"' --set 'optim.implementation=\"fused\"' ";

// `host train` on trajectory.toml into `out`, from the initial weights Python saved in `dir`.
tp::test::HostRun train_from_init(const std::filesystem::path& dir, const std::filesystem::path& out,
                                  const std::string& sets) {
  return tp::test::run_host("--config tests/integration_oracle/trajectory.toml --plugin-dir '" +
                            std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + out.string() +
                            "' --set 'train.init_weights=\"" + (dir / "init.pt").string() + "\"' " + sets);
}

std::string python(const std::string& mode, const std::filesystem::path& dir) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()), "the oracle needs the project venv: " << tp::test::python());
  const auto run = tp::test::run_shell(std::string("'") + tp::test::python() + "' " + kScript + " " + mode + " '" +
                                       dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return run.output;
}

}  // namespace

TEST_CASE("host train follows a plain PyTorch loop step for step (SGD, AdamW; accumulation; fused)") {
  const auto dir = tp::test::fresh_dir("trajectory_oracle");
  python("init", dir);
  for (const auto& [optimizer, optimizer_sets] : kOptimizers) {
    for (const auto& [run, run_sets] : kRuns) {
      const auto out = dir / (optimizer + "_" + run);
      const auto host = train_from_init(dir, out, optimizer_sets + " " + run_sets);
      INFO(optimizer, " ", run, ":\n", host.output);
      REQUIRE(host.exit_code == 0);
      CHECK(host.output.find("initial weights from") != std::string::npos);
    }
  }

  std::istringstream lines(python("compare", dir));
  int diffs = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    INFO(line);
    if (tag == "diff") {
      std::string run, reference, what;
      double value = 0;
      in >> run >> reference >> what >> value;
      MESSAGE("trajectory oracle: " << run << " vs " << reference << " " << what << " max relative difference "
                                    << value);
      CHECK(value <= kTolerance);
      ++diffs;
    } else if (tag == "steps") {
      std::string run;
      int steps = 0;
      in >> run >> steps;
      CHECK(steps == kTrajectoryOracleSteps);
    } else if (tag == "clipped") {
      std::string optimizer;
      int clipped = 0, total = 0;
      in >> optimizer >> clipped >> total;
      MESSAGE("trajectory oracle: " << optimizer << " clipped " << clipped << " of " << total << " steps");
      CHECK(clipped * 2 >= total);  // clipping is really exercised
    } else if (!line.empty()) {
      MESSAGE("python: " << line);
    }
  }
  // optimizers x (comparisons x (loss, weights) + runs x (grad_norm, clipped_fraction))
  CHECK(diffs == 2 * (5 * 2 + 3 * 2));
}

// Issue 42's check of the graph-safe update: the fused kernels read the lr from a tensor the
// schedule writes between steps, so a late or wrong write shows as a trajectory apart from
// torch.optim's own fused step given the same lr (taking the lr one step early moves the weights
// 3% and the loss 15%). fp32 and bf16 (the forward and the loss under autocast on both sides), all
// within kTolerance; measured on the CPU: fp32 at most 8.8e-7 (loss) and 2.2e-7 (weights), bf16
// losses equal to the bit and weights within 8.1e-8. The fp32 differences are the order of the
// loss reduction (the host sums, then divides by the item count; F.mse_loss takes the mean).
TEST_CASE("host train follows torch.optim's fused step with the lr changing every step (SGD, Nesterov, Adam, AdamW; fp32, bf16)") {
  const auto dir = tp::test::fresh_dir("trajectory_oracle_scheduled");
  python("init", dir);
  for (const auto& [optimizer, optimizer_sets] : kScheduledOptimizers) {
    for (const std::string run : {"cosine", "cosine_bf16"}) {
      const auto out = dir / (optimizer + "_" + run);
      const std::string precision = run == "cosine" ? "" : "--set 'amp.precision=\"bf16\"' ";
      const auto host = train_from_init(dir, out, optimizer_sets + " " + kScheduledSets + precision);
      INFO(optimizer, " ", run, ":\n", host.output);
      REQUIRE(host.exit_code == 0);
    }
  }
  std::istringstream lines(python("scheduled", dir));
  int diffs = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string tag, run;
    in >> tag >> run;
    INFO(line);
    if (tag == "diff") {
      std::string reference, what;
      double value = 0;
      in >> reference >> what >> value;
      MESSAGE("trajectory oracle, scheduled: " << run << " " << what << " max relative difference " << value);
      CHECK(value <= kTolerance);
      ++diffs;
    } else if (tag == "steps" || tag == "lrs") {
      int count = 0;
      in >> count;
      CHECK(count == kScheduledSteps); // every step logged, and every step at its own lr
    } else if (!line.empty()) {
      MESSAGE("python: " << line);
    }
  }
  CHECK(diffs == 4 * 2 * 2); // optimizers x precisions x (loss, weights)
}
