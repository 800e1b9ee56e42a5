// Collectives::all_gather_rows on 2 Gloo ranks (gather_rows_driver.cpp): the rows a metric keeps
// instead of sums (plugin ABI 1.7, COCO mAP's detections) arrive concatenated in rank order with
// any count per rank, zero included; when no rank has a row nothing is sent; rows of another width
// or of no dims on one rank make both ranks throw the same refusal, and the ranks stay in step.
#include <filesystem>
#include <fstream>
#include <string>

#include "free_port.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

TEST_CASE("all_gather_rows: rank order, empty ranks, and refusals every rank shares") {
  const auto dir = tp::test::fresh_dir("gather_rows");
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(tp::test::free_port());
  const std::string driver = std::string("'") + tp::test::build_dir() + "/bin/gather_rows_driver' '" + dir.string() + "'";
  const auto run = tp::test::run_shell("RANK=1 LOCAL_RANK=1 " + env + " " + driver + " & RANK=0 LOCAL_RANK=0 " + env +
                                       " " + driver + "; first=$?; wait $!; second=$?; exit $((first + second))");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank ", rank);
    std::ifstream in(dir / ("rank" + std::to_string(rank) + ".txt"));
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(line == "counts rows 4 width 2 0 1 2 3 4 5 10 11");
    REQUIRE(std::getline(in, line));
    CHECK(line == "one_empty rows 2 width 2 0 1 2 3");
    REQUIRE(std::getline(in, line));
    CHECK(line == "all_empty rows 0 width 2");
    REQUIRE(std::getline(in, line));
    CHECK(line.starts_with("width threw "));
    CHECK(line.find("ranks gather rows of different shapes or dtypes: rank 0 has [1, 2] Double, rank 1 has [1, 3] Double") !=
          std::string::npos);
    REQUIRE(std::getline(in, line));
    CHECK(line.starts_with("no_dims threw "));
    CHECK(line.find("rank 1 has rows of no dims") != std::string::npos);
    REQUIRE(std::getline(in, line));
    CHECK(line == "after rows 2 width 1 1 2");
  }
}

TEST_CASE("a third-party metric's gathered rows on 2 host ranks: every row everywhere; a hostile shape stops both") {
  // tests/fixtures/gathered_probe: one row per evaluated sample. 33 val samples over 2 ranks.
  const std::string base = "--nproc-per-node 2 --config tests/dist/gathered_metric.toml --plugin-dir '" +
                           std::string(tp::test::fixture_plugin_dir()) + "' ";
  const auto dir = tp::test::fresh_dir("gathered_metric");
  const auto run = tp::test::run_host(base + "--output-dir '" + dir.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(tp::test::read_text(dir / "history.jsonl").find("\"val/rows\":33") != std::string::npos);
  // Rank 1's rows 3 wide where rank 0's are 2, then float32 where rank 0's are float64: both ranks
  // end with the same refusal naming the metric's rows, neither waits for the other. The sanity
  // check before training finds it (its 2 batches of 8 per rank: 16 rows each), before a step.
  for (const std::string hostile : {"--set metrics[1].rank=1 --set metrics[1].rank_width=3",
                                    "--set metrics[1].rank=1 --set metrics[1].rank_width=2 --set metrics[1].rank_float=true"}) {
    CAPTURE(hostile);
    const auto bad_dir = tp::test::fresh_dir("gathered_metric_hostile");
    const auto bad = tp::test::run_host(base + "--output-dir '" + bad_dir.string() + "' " + hostile);
    INFO(bad.output);
    CHECK(bad.exit_code != 0);
    for (const char* rank : {"[rank 0]", "[rank 1]"}) {
      const std::size_t at = bad.output.find(std::string(rank) + " host: error:");
      REQUIRE(at != std::string::npos);
      const std::string line = bad.output.substr(at, bad.output.find('\n', at) - at);
      CHECK(line.find("ranks gather rows of different shapes or dtypes: rank 0 has [16, 2] Double, rank 1 has [16, ") !=
            std::string::npos);
      CHECK(line.find("gather the rows 'rows' of metric org.torchhost.test.gathered_probe over ranks") !=
            std::string::npos);
    }
    CHECK(bad.output.find("sanity check: evaluating 2 batch(es)") != std::string::npos);
    const auto history = bad_dir / "history.jsonl";
    CHECK((!std::filesystem::exists(history) ||
           tp::test::read_text(history).find("\"kind\":\"step\"") == std::string::npos)); // no step trained
  }
}

TEST_CASE("a metric that reports two values of one name is refused, naming it, before a step trains") {
  // Values are logged and monitored by name: the second would silently replace the first (COCO's
  // per-class "map_50" once hid the summary's).
  const auto dir = tp::test::fresh_dir("gathered_metric_duplicate");
  const auto run = tp::test::run_host("--config tests/dist/gathered_metric.toml --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                                      "' --set metrics[1].duplicate_name=true");
  INFO(run.output);
  CHECK(run.exit_code == 1);  // a plugin call failing (tp::ExitCode)
  CHECK(run.output.find("plugin component 'org.torchhost.test.gathered_probe' (gathered_probe.so) reported two values "
                        "named 'rows': each value needs its own name") != std::string::npos);
  const auto history = dir / "history.jsonl";
  CHECK((!std::filesystem::exists(history) ||
         tp::test::read_text(history).find("\"kind\":\"step\"") == std::string::npos));
}
