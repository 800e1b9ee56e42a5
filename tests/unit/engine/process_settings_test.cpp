// ARCH-17 in one function (apply_process_settings, runtime_setup.h): every process setting a
// command gets, from the config alone, whatever ran before in the process. The thread share of a
// node's ranks used to be computed in the host's session, apart from the rest, for training only.
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <string>
#include <thread>

#include "tp/framework/engine/runtime_setup.h"

#include "support/doctest_after_torch.h"

namespace {

tp::RunConfig settings_config(int64_t threads, int64_t num_workers) {
  tp::RunConfig config{};
  config.run.threads = threads;
  config.data.num_workers = num_workers;
  return config;
}

// Determinism outlives the call (apply_determinism changes nothing when it is off), so a case
// that turns it on turns it off again for the cases after it.
void leave_determinism_off() {
  at::globalContext().setDeterministicAlgorithms(false, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(false);
}

}  // namespace

TEST_CASE("apply_process_settings: run.threads = 0 shares the node's cores among its ranks, less the loader's") {
  const int threads_before = at::get_num_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const c10::Device cpu(c10::kCPU);
  for (const int ranks : {1, 2, 4}) {
    CAPTURE(ranks);
    const tp::ProcessSettings shared = tp::apply_process_settings(settings_config(0, 1), cpu, ranks);
    CHECK(shared.cpu.intra_op_threads == std::max(1, cores / ranks - 1));
    CHECK(at::get_num_threads() == shared.cpu.intra_op_threads);
    CHECK(shared.cpu.loader_threads == 1);
  }
  // An explicit count wins over the share, with any number of ranks.
  const tp::ProcessSettings explicit_count = tp::apply_process_settings(settings_config(3, 2), cpu, 4);
  CHECK(explicit_count.cpu.intra_op_threads == 3);
  CHECK(at::get_num_threads() == 3);
  CHECK(explicit_count.cpu.describe().find("intra-op threads 3") != std::string::npos);
  at::set_num_threads(threads_before);
}

TEST_CASE("apply_process_settings sets cuDNN autotuning and TF32 on and off explicitly; run.deterministic turns autotuning off") {
  const c10::Device cpu(c10::kCPU);
  auto& context = at::globalContext();
  tp::RunConfig config = settings_config(1, 0);
  config.run.cudnn_benchmark = true;
  config.run.tf32 = true;
  const tp::ProcessSettings on = tp::apply_process_settings(config, cpu, 1);
  CHECK(context.benchmarkCuDNN());
  CHECK(context.allowTF32CuBLAS());
  CHECK(context.allowTF32CuDNN());
  CHECK(on.warnings.empty());
  CHECK(on.determinism.find("off") != std::string::npos);

  // Off again, explicitly: a second run in the same process does not inherit the first's switches.
  config.run.cudnn_benchmark = false;
  config.run.tf32 = false;
  tp::apply_process_settings(config, cpu, 1);
  CHECK_FALSE(context.benchmarkCuDNN());
  CHECK_FALSE(context.allowTF32CuBLAS());
  CHECK_FALSE(context.allowTF32CuDNN());

  // run.deterministic overrides run.cudnn_benchmark, and says so.
  config.run.cudnn_benchmark = true;
  config.run.deterministic = true;
  const tp::ProcessSettings deterministic = tp::apply_process_settings(config, cpu, 1);
  CHECK(context.deterministicAlgorithms());
  CHECK_FALSE(context.benchmarkCuDNN());
  REQUIRE(deterministic.warnings.size() == 1);
  CHECK(deterministic.warnings.front().find("run.cudnn_benchmark is ignored") != std::string::npos);
  CHECK(deterministic.determinism.find("on") != std::string::npos);
  leave_determinism_off();
}
