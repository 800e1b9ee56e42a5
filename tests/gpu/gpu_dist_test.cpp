// NCCL on the GPU (docs/distributed.md): one launcher-started rank with dist.backend = "nccl"
// builds a real c10d::ProcessGroupNCCL (framework/src/dist/dist_context.cpp), whose communicator
// NCCL itself reports (NCCL_DEBUG=INFO), and trains to the weights of the single-process run.
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "gpu/gpu_helpers.h"
#include "integration/checkpoint_compare.h"

#include <doctest/doctest.h>

using tp::gpu_test::contains;
using tp::gpu_test::kNeedsCuda;
using tp::gpu_test::kQuickstart;

TEST_CASE("NCCL with one rank: a real NCCL communicator, and the weights of the single-process run") {
  REQUIRE_MESSAGE(at::hasCUDA(), kNeedsCuda);
  const std::string args = kQuickstart + "--set run.deterministic=true --set train.epochs=1 ";
  const auto single_dir = tp::test::fresh_dir("gpu_nccl_single");
  const auto single = tp::test::run_host(args + "--output-dir '" + single_dir.string() + "'");
  INFO(single.output);
  REQUIRE(single.exit_code == 0);

  // NCCL_DEBUG=INFO makes libnccl print its own initialisation (to the rank's stdout, which the
  // launcher passes on): those lines exist only when a ProcessGroupNCCL created a communicator,
  // which happens at its first collective (the model broadcast, then every step's agreement).
  const auto dir = tp::test::fresh_dir("gpu_nccl_rank");
  const auto ranked = tp::gpu_test::run_host_with_env(
      "NCCL_DEBUG=INFO",
      "--nproc-per-node 1 " + args + "--set dist.backend=\"nccl\" --output-dir '" + dir.string() + "'");
  INFO(ranked.output);
  REQUIRE(ranked.exit_code == 0);
  // The host's own words (host/session.cpp): "rank 0 of 1 joined (<launcher>, nccl, cuda:0)" is
  // logged after DistContext::join returned, i.e. after the c10d::ProcessGroupNCCL was built
  // (a failure there ends the run with "could not build the nccl process group"); the gradient
  // reducer then names its backend.
  const auto joined = ranked.output.find("rank 0 of 1 joined (");
  REQUIRE(joined != std::string::npos);
  const std::string joined_line = ranked.output.substr(joined, ranked.output.find('\n', joined) - joined);
  CHECK(contains(joined_line, ", nccl, cuda:0)"));
  CHECK(contains(ranked.output, "data-parallel: 1 ranks, backend nccl"));
  CHECK_FALSE(contains(ranked.output, "could not build the nccl process group"));
  // NCCL's: a communicator of one rank was initialised (ncclCommInitRank*/"Init COMPLETE").
  CHECK(contains(ranked.output, "NCCL INFO"));
  CHECK((contains(ranked.output, "Init COMPLETE") || contains(ranked.output, "ncclCommInit")));
  CHECK(contains(ranked.output, "nranks 1"));
  // runtime.toml: one rank, the NCCL the host was built with is the one that ran, and the
  // variable that asked for the debug output reached the rank.
  const toml::table runtime = tp::gpu_test::read_toml(dir / "runtime.toml");
  CHECK(tp::gpu_test::toml_number(runtime, "world_size") == 1);
  CHECK(tp::gpu_test::toml_string(runtime, "device") == "cuda:0");
  const std::string nccl = tp::gpu_test::toml_string(runtime, "provenance.nccl");
  CHECK(!nccl.empty());
  MESSAGE("runtime.toml provenance.nccl = " << nccl);
  // libnccl's own version line (rank 0 prints "NCCL version 2.x.y+cudaX.Y" at INFO level).
  if (contains(ranked.output, "NCCL version "))
    CHECK_MESSAGE(contains(ranked.output, "NCCL version " + nccl),
                  "the libnccl that ran is not the version the host was compiled against");
  else
    WARN_MESSAGE(false, "libnccl printed no \"NCCL version\" line; its version was not compared");
  CHECK(tp::gpu_test::toml_string(runtime, "provenance.environment.NCCL_DEBUG") == "INFO");

  const auto a = tp::load_checkpoint(single_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(dir / "checkpoints" / "last.pt");
  CHECK(a.step == b.step);
  CHECK(a.step > 0);
  CHECK(b.world_size == 1);
  // One rank: the all-reduce sums one contribution and divides by one, so only the order of
  // floating-point work could differ; it does not.
  CHECK(tp::test::max_relative_difference(a, b) <= 1e-6);
}
