// Variable-size fields (plugin ABI 1.6) through the real host, on variable_data (a ragged
// `points` field with empty samples, a padded `seq` field) and set_model, which reads them as
// batched (tests/fixtures/variable_fields): `host plugins check` reports and batches them, every
// `host verify` check passes (micro-batch accumulation, bitwise resume and 2-rank training
// equal to 1 process), training learns through them, 2-rank evaluation equals 1 process exactly,
// predict writes one row per sample, and batch transforms are refused with a reason.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "integration/host_runner.h"
#include "tp/framework/error.h"
#include "verify/verify_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
using tp::test::json_number;

const std::string kConfig = "--config tests/variable_fields/variable.toml --plugin-dir '" +
                            std::string(tp::test::fixture_plugin_dir()) + "' ";

/// A run trained once per test binary run.
const fs::path& trained_run() {
  static const fs::path dir = [] {
    const fs::path d = tp::test::fresh_dir("variable_fields_run");
    const auto run = tp::test::run_host("--output-dir '" + d.string() + "' " + kConfig);
    INFO(run.output);
    REQUIRE(run.exit_code == tp::kExitOk);
    return d;
  }();
  return dir;
}

}  // namespace

TEST_CASE("host plugins check reads the declared fields as variable and batches the samples it read") {
  const auto run =
      tp::test::run_host("plugins check '" + std::string(tp::test::fixture_plugin_dir()) + "/variable_data.so'");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  CHECK(run.output.find("points float32[*, 2] (ragged)") != std::string::npos);
  CHECK(run.output.find("seq float32[*] (pad 0)") != std::string::npos);
  CHECK(run.output.find("batched alike") != std::string::npos);
}

TEST_CASE("host verify: every check passes with a ragged and a padded field") {
  const auto run = tp::test::verify("verify_variable_fields", kConfig + "--steps 3");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  for (const char* check :
       {"data", "loss", "metric", "gradients", "accumulation", "resume", "distributed", "overfit"}) {
    INFO(check);
    CHECK(tp::test::result_of(run.output, check) == "PASS");
  }
}

TEST_CASE("training learns through the variable-size fields; 2-rank evaluation equals 1 process") {
  const fs::path& dir = trained_run();
  const std::string history = tp::test::read_text(dir / "history.jsonl");
  CHECK(history.find("val/accuracy") != std::string::npos);
  const auto single = tp::test::run_host("eval --output-dir '" + dir.string() + "' " + kConfig + "--checkpoint last");
  INFO(single.output);
  REQUIRE(single.exit_code == tp::kExitOk);
  const std::string one = tp::test::read_text(dir / "eval_last.json");
  // The classes differ in their mean point and sequence by more than the noise: a model that
  // reads the fields right separates them.
  CHECK(json_number(one, "val/accuracy") >= 0.95);
  const auto two = tp::test::run_host("--nproc-per-node 2 eval --output-dir '" + dir.string() + "' " + kConfig +
                                      "--checkpoint last");
  INFO(two.output);
  REQUIRE(two.exit_code == tp::kExitOk);
  const std::string both = tp::test::read_text(dir / "eval_last.json");
  // 61 samples: rank 0 reads 31, rank 1 30, each in batches padded to their own longest sample.
  CHECK(json_number(both, "val/accuracy") == json_number(one, "val/accuracy"));
  CHECK(json_number(both, "val/loss") == doctest::Approx(json_number(one, "val/loss")).epsilon(1e-6));
}

TEST_CASE("host predict writes one row per sample: labels, not a ragged field's offsets") {
  const fs::path& dir = trained_run();
  const fs::path out = dir / "p.csv";
  const auto run = tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kConfig +
                                      "--checkpoint last --format csv --output '" + out.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == tp::kExitOk);
  const std::string csv = tp::test::read_text(out);
  INFO(csv.substr(0, 300));
  CHECK(csv.starts_with("index,logits.0,logits.1,logits.argmax,logits.prob,label\n"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 61);
}

TEST_CASE("host predict --outputs naming only dense outputs of a model with ragged ones writes them as usual") {
  // The dense trial's F15: a model returning boxes beside a dense output could not have that
  // output written (csv, npy, per-pixel maps): the ragged outputs took the batch's path.
  const fs::path& dir = trained_run();
  const auto predict = [&](const std::string& name, const std::string& sets) {
    const fs::path out = dir / name;
    const auto run = tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kConfig + sets +
                                        "--checkpoint last --format csv --outputs logits --output '" + out.string() + "'");
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitOk);
    return tp::test::read_text(out);
  };
  const std::string plain = predict("plain.csv", "");
  const std::string with_echo = predict("with_echo.csv", "--set model.echo=true ");
  CHECK(plain.starts_with("index,logits.0,logits.1,logits.argmax,logits.prob,label\n"));
  CHECK(with_echo == plain);
}

TEST_CASE("a model's ragged output is checked at the boundary: offsets past its rows never reach a writer") {
  const fs::path& dir = trained_run();
  // The points echoed with their own offsets: written, one row per sample, the points nested.
  const fs::path good = dir / "echo.jsonl";
  const auto echoed = tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kConfig +
                                         "--set model.echo=true --checkpoint last --format jsonl --outputs logits,echo "
                                         "--output '" + good.string() + "'");
  INFO(echoed.output);
  REQUIRE(echoed.exit_code == tp::kExitOk);
  const std::string rows = tp::test::read_text(good);
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 61);
  CHECK(rows.find("\"echo\":[[") != std::string::npos);
  // Hostile offsets (the 2,000 rows past the end; a start past 0; a decrease; a huge one):
  // refused before the jsonl writer or any metric reads a row, nothing written. Before the
  // check, the first wrote 2,000 rows of heap bytes with exit 0 and the last crashed.
  for (const std::string offsets : {"[0, 2000, 3, 3, 3]", "[1, 2, 3]", "[0, 5, 2]", "[0, 4611686018427387904]"}) {
    const fs::path out = dir / "hostile.jsonl";
    const auto run = tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kConfig +
                                        "--set model.echo=true --set 'model.echo_offsets=" + offsets +
                                        "' --checkpoint last --format jsonl --outputs logits,echo --output '" +
                                        out.string() + "'");
    INFO(offsets, ": ", run.output);
    CHECK(run.exit_code == tp::kExitRuntime);
    CHECK(run.output.find("org.torchhost.test.set_model") != std::string::npos);
    CHECK(run.output.find("'echo_offsets'") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
    // Training: refused at its first step, before the loss or a metric sees the outputs.
    const auto train = tp::test::run_host("--output-dir '" + (dir / "hostile_train").string() + "' " + kConfig +
                                          "--set train.epochs=1 --set model.echo=true --set 'model.echo_offsets=" +
                                          offsets + "'");
    INFO(train.output);
    CHECK(train.exit_code == tp::kExitRuntime);
    CHECK(train.output.find("'echo_offsets'") != std::string::npos);
  }
}

TEST_CASE("batch transforms are refused on variable-size training data, with the reason") {
  const fs::path dir = tp::test::fresh_dir("variable_fields_mixup");
  const fs::path config = dir / "mixup.toml";
  {
    std::ofstream out(config);
    out << tp::test::read_text(fs::path(tp::test::source_dir()) / "tests/variable_fields/variable.toml")
        << "\n[[data.batch_transforms]]\ncomponent = \"org.torchhost.mixup\"\nnum_classes = 2\n";
  }
  const auto run = tp::test::run_host("--output-dir '" + dir.string() + "' --config '" + config.string() +
                                      "' --plugin-dir '" + std::string(tp::test::fixture_plugin_dir()) + "'");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitConfig);
  CHECK(run.output.find("declares variable-size fields (points: ragged, seq: pad 0)") != std::string::npos);
  CHECK(run.output.find("do not apply to padded or ragged batches") != std::string::npos);
}
