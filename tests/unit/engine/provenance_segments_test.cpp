// A run's earlier processes in its provenance (with_earlier_segments, engine/setup/provenance.h;
// docs/hardening.md, "Provenance"). User trial: after a resume, runtime.toml and the checkpoints
// described only the last process; that the first epochs ran with another plugin binary survived
// only as a warning line in train.log.
#include <toml++/toml.h>

#include <string>

#include "engine/setup/provenance.h"

#include "support/doctest_after_torch.h"

namespace {

/// A process's provenance as collect_provenance would give it, told apart by `n`.
tp::Provenance process(int n) {
  tp::Provenance p;
  p.host_version = "v1.2-" + std::to_string(n);
  p.libtorch = "2.5.1";
  p.cuda = n % 2 == 0 ? "12.4" : "";
  p.command_line = "host --resume auto --set train.epochs=" + std::to_string(n);
  p.hostname = "node" + std::to_string(n);
  p.started = "2026-11-29T10:00:" + std::to_string(n) + "Z";
  p.plugins.push_back({"basic_metrics.so", "/p/basic_metrics.so", std::string(64, 'a' + n % 6), {"org.x.acc@1.0.0"}});
  return p;
}

/// The process after `recorded` (provenance_toml of the checkpoint it resumes from), as the
/// trainer's resume makes it.
tp::Provenance resumed(int n, const tp::Provenance& recorded, int64_t step, int64_t epoch) {
  return tp::with_earlier_segments(process(n), tp::provenance_toml(recorded), step, epoch);
}

}  // namespace

TEST_CASE("a resume carries the checkpoint's processes forward, oldest first, each with its binaries and command") {
  const tp::Provenance first = process(1);
  const tp::Provenance second = resumed(2, first, 40, 2);
  const tp::Provenance third = resumed(3, second, 60, 3);
  REQUIRE(third.earlier.size() == 2);
  CHECK(third.resumed_step == 60);
  CHECK(third.resumed_epoch == 3);
  CHECK(third.earlier_dropped == 0);
  CHECK(third.earlier[0].started == first.started);
  CHECK(third.earlier[0].hostname == "node1");
  CHECK(third.earlier[0].host_version == "v1.2-1");
  CHECK(third.earlier[0].libtorch == "2.5.1");
  CHECK(third.earlier[0].cuda.empty());
  CHECK(third.earlier[0].command_line == first.command_line);
  CHECK(third.earlier[0].resumed_step == 0); // the run's first process
  CHECK(third.earlier[0].resumed_epoch == 0);
  CHECK(third.earlier[0].plugins == std::vector<std::pair<std::string, std::string>>{{"basic_metrics.so", std::string(64, 'b')}});
  CHECK(third.earlier[1].started == second.started);
  CHECK(third.earlier[1].cuda == "12.4");
  CHECK(third.earlier[1].resumed_step == 40);
  CHECK(third.earlier[1].resumed_epoch == 2);
  CHECK(third.earlier[1].plugins[0].second == std::string(64, 'c'));
  // The text written to runtime.toml and the checkpoints: [[provenance.earlier]] in that order.
  const toml::table text = toml::parse(tp::provenance_toml(third));
  CHECK(text.at_path("provenance.resumed_step").value_or(int64_t{-1}) == 60);
  CHECK(text.at_path("provenance.earlier").as_array()->size() == 2);
  CHECK(text.at_path("provenance.earlier[0].hostname").value_or(std::string()) == "node1");
  CHECK(text.at_path("provenance.earlier[0].cuda").node() == nullptr); // only where set
  CHECK(text.at_path("provenance.earlier[1].cuda").value_or(std::string()) == "12.4");
  CHECK(text.at_path("provenance.earlier[1].plugins[0].library").value_or(std::string()) == "basic_metrics.so");
  CHECK(text.at_path("provenance.earlier[1].plugins[0].path").node() == nullptr); // {library, sha256} only
  CHECK(text.at_path("provenance.earlier_dropped").node() == nullptr);
}

TEST_CASE("a checkpoint written before the record (no earlier, no resumed_step) gives its process as the one earlier entry") {
  const std::string old = R"([provenance]
host_version = "v1.0"
libtorch = "2.5.1"
cuda = "12.4"
command_line = "host --config run.toml"
hostname = "old-node"
started = "2026-11-01T00:00:00Z"
[provenance.environment]
TP_RUN_SEED = "1"
[[provenance.plugins]]
library = "shapes.so"
path = "/old/shapes.so"
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"
components = ["org.torchhost.shapes@1.0.0"]
)";
  const tp::Provenance now = tp::with_earlier_segments(process(2), old, 20, 1);
  REQUIRE(now.earlier.size() == 1);
  CHECK(now.earlier[0].hostname == "old-node");
  CHECK(now.earlier[0].cuda == "12.4");
  CHECK(now.earlier[0].resumed_step == -1); // it did not say: left out, not claimed to be 0
  CHECK(now.earlier[0].plugins.size() == 1);
  CHECK(now.earlier_dropped == 0);
  const toml::table text = toml::parse(tp::provenance_toml(now));
  CHECK(text.at_path("provenance.earlier[0].resumed_step").node() == nullptr);
  CHECK(text.at_path("provenance.earlier[0].plugins[0].sha256").value_or(std::string()) == std::string(64, '1'));
}

TEST_CASE("at most 64 earlier processes are kept: the oldest go, counted in earlier_dropped") {
  tp::Provenance run = process(0);
  for (int n = 1; n <= 200; ++n) run = resumed(n, run, 10 * n, n);
  CHECK(run.earlier.size() == tp::kMaxEarlierSegments);
  CHECK(run.earlier_dropped == 200 - 64);
  CHECK(run.earlier.front().started == process(136).started); // processes 0..135 dropped
  CHECK(run.earlier.back().started == process(199).started);
  const std::string text = tp::provenance_toml(run);
  CHECK(toml::parse(text).at_path("provenance.earlier_dropped").value_or(int64_t{0}) == 136);
  MESSAGE("provenance text after 200 resumes: " << text.size() << " bytes");
  CHECK(text.size() < 64 * 1024);
  // A smaller bound, and none at all.
  CHECK(tp::with_earlier_segments(process(9), text, 1, 1, 3).earlier.size() == 3);
  CHECK(tp::with_earlier_segments(process(9), text, 1, 1, 3).earlier_dropped == 136 + 62);
  CHECK(tp::with_earlier_segments(process(9), text, 1, 1, 0).earlier.empty());
}

TEST_CASE("a checkpoint without provenance, unreadable or of wrong types costs entries, never the resume") {
  const tp::Provenance none = tp::with_earlier_segments(process(1), "", 5, 1);
  CHECK(none.earlier.empty());
  CHECK(none.earlier_dropped == 1); // a process trained it, but recorded nothing to list
  CHECK(none.resumed_step == 5);
  CHECK(tp::with_earlier_segments(process(1), "[provenance\nx", 5, 1).earlier_dropped == 1);
  const std::string hostile = R"([provenance]
hostname = 7
earlier_dropped = -5
resumed_step = "x"
plugins = "none"
earlier = [1, "x", { started = 3, hostname = "h", plugins = [2, { library = "a.so" }] }]
)";
  const tp::Provenance now = tp::with_earlier_segments(process(1), hostile, 5, 1);
  REQUIRE(now.earlier.size() == 2);
  CHECK(now.earlier_dropped == 2); // the two entries that are no table
  CHECK(now.earlier[0].hostname == "h");
  CHECK(now.earlier[0].started.empty());
  CHECK(now.earlier[0].plugins == std::vector<std::pair<std::string, std::string>>{{"a.so", ""}});
  CHECK(now.earlier[1].hostname.empty());
  CHECK(now.earlier[1].resumed_step == -1);
}

TEST_CASE("an earlier process's command line is redacted again, and what a checkpoint carries forward is bounded") {
  // A checkpoint from before command lines were redacted, or another's given to --resume FILE:
  // its password must not reach runtime.toml (an MLflow artifact) nor the later checkpoints.
  std::string old = R"([provenance]
command_line = "host --set logging.mlflow.tracking_uri=http://alice:s3cret@mlflow:5000"
hostname = ")" + std::string(100000, 'h') + "\"\n";
  for (int i = 0; i < 500; ++i)
    old += "[[provenance.plugins]]\nlibrary = \"p" + std::to_string(i) + ".so\"\nsha256 = \"00\"\n";
  const tp::Provenance now = tp::with_earlier_segments(process(2), old, 20, 1);
  REQUIRE(now.earlier.size() == 1);
  CHECK(now.earlier[0].command_line == "host --set logging.mlflow.tracking_uri=http://***@mlflow:5000");
  CHECK(now.earlier[0].hostname.size() <= 4096 + 64);
  CHECK(now.earlier[0].plugins.size() == 64);
  CHECK(tp::provenance_toml(now).find("s3cret") == std::string::npos);
}
