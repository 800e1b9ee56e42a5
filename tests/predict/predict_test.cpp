// `host predict` and `host eval --split test` (docs/predict.md): Python reads the files back and
// recomputes the accuracy `host eval` reported; csv, jsonl and npy hold the same rows in dataset
// order; a 2-rank prediction is the 1-rank file byte for byte (the val split has an odd size, so
// the shards differ and the last batches are partial).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integration/host_runner.h"
#include "support/run_files.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
using tp::test::json_number;

const std::string kConfig =
    "--config configs/quickstart.toml --set train.epochs=1 --set data.train.size=320 --set data.train.val_size=203 "
    "--set data.train.test_size=101 --set train.batch_size=16 --set data.num_workers=0 "
    "--set 'progress.mode=\"off\"' ";

/// A trained run directory shared by the cases (trained once per test binary run).
const fs::path& trained_run() {
  static const fs::path dir = [] {
    const fs::path d = tp::test::fresh_dir("predict_run");
    const auto run = tp::test::run_host("--output-dir '" + d.string() + "' " + kConfig);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    return d;
  }();
  return dir;
}

tp::test::HostRun predict(const fs::path& dir, const std::string& args) {
  return tp::test::run_host("predict --output-dir '" + dir.string() + "' " + kConfig + "--checkpoint last " + args);
}

/// The oracle script: `ok <accuracy>` when every check passes.
tp::test::HostRun python_check(int rows, const std::string& accuracy, const std::string& files) {
  return tp::test::run_shell(std::string("'") + tp::test::python() + "' tests/predict/check_predictions.py " +
                             std::to_string(rows) + " " + accuracy + " " + files);
}

}  // namespace

TEST_CASE("host predict: csv, jsonl and npy rows in dataset order; Python recomputes host eval's accuracy") {
  const fs::path& dir = trained_run();
  const auto eval = tp::test::run_host("eval --output-dir '" + dir.string() + "' " + kConfig + "--checkpoint last");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  // Built by assemble_run like a training run: the same process settings, reported (ARCH-17).
  CHECK(eval.output.find("cpu settings: ") != std::string::npos);
  CHECK(eval.output.find("deterministic algorithms: off") != std::string::npos);
  const double accuracy = json_number(tp::test::read_text(dir / "eval_last.json"), "val/accuracy");
  for (const std::string format : {"csv", "jsonl", "npy"}) {
    const auto run = predict(dir, "--format " + format + " --output '" + (dir / ("p." + format)).string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.output.find("for 203 samples of the val split") != std::string::npos);
    CHECK(tp::test::temporaries_below(dir) == ""); // p.<format>.<random>.partial-<pid> was renamed
  }
  const auto check = python_check(203, std::to_string(accuracy),
                                  "'" + (dir / "p.csv").string() + "' '" + (dir / "p.jsonl").string() + "' '" +
                                      (dir / "p.npy").string() + "'");
  INFO(check.output);
  CHECK(check.exit_code == 0);
  CHECK(check.output.rfind("ok ", 0) == 0);
  // The default name says split, checkpoint and format.
  const auto named = predict(dir, "");
  INFO(named.output);
  REQUIRE(named.exit_code == 0);
  CHECK(tp::test::read_text(dir / "predictions_val_last.csv") == tp::test::read_text(dir / "p.csv"));
}

TEST_CASE("host predict on 2 ranks writes the 1-rank file byte for byte (csv and npy)") {
  const fs::path& dir = trained_run();
  for (const std::string format : {"csv", "npy"}) {
    CAPTURE(format);
    const fs::path one = dir / ("one." + format), two = dir / ("two." + format);
    const auto single = predict(dir, "--format " + format + " --output '" + one.string() + "'");
    INFO(single.output);
    REQUIRE(single.exit_code == 0);
    const auto pair = tp::test::run_host("--nproc-per-node 2 predict --output-dir '" + dir.string() + "' " + kConfig +
                                         "--checkpoint last --format " + format + " --output '" + two.string() + "'");
    INFO(pair.output);
    REQUIRE(pair.exit_code == 0);
    // run.threads = 0: the two ranks of this node share its cores (data.num_workers = 0 here).
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    CHECK(pair.output.find("intra-op threads " + std::to_string(std::max(1, cores / 2)) + ",") != std::string::npos);
    REQUIRE(fs::file_size(one) > 1000);
    CHECK(tp::test::read_text(one) == tp::test::read_text(two));
  }
}

TEST_CASE("host eval --split test and host predict --split test read the test split, not val") {
  const fs::path& dir = trained_run();
  const auto eval =
      tp::test::run_host("eval --output-dir '" + dir.string() + "' " + kConfig + "--checkpoint last --split test");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  const std::string json = tp::test::read_text(dir / "eval_last_test.json");
  CHECK(json.find("\"split\":\"test\"") != std::string::npos);
  const double accuracy = json_number(json, "test/accuracy");
  const auto run = predict(dir, "--split test --output '" + (dir / "test.csv").string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto check = python_check(101, std::to_string(accuracy), "'" + (dir / "test.csv").string() + "'");
  INFO(check.output);
  CHECK(check.exit_code == 0);
  // shapes renders its test images from their own content keys: row 0 is another image than val's.
  const auto val = predict(dir, "--output '" + (dir / "val.csv").string() + "'");
  REQUIRE(val.exit_code == 0);
  const std::string test_text = tp::test::read_text(dir / "test.csv"), val_text = tp::test::read_text(dir / "val.csv");
  const auto second_line = [](const std::string& text) {
    const auto start = text.find('\n') + 1;
    return text.substr(start, text.find('\n', start) - start);
  };
  CHECK(second_line(test_text) != second_line(val_text));
}

TEST_CASE("host predict: --outputs is checked against the model, --tta hflip averages the mirrored pass") {
  const fs::path& dir = trained_run();
  const auto bad = predict(dir, "--outputs logits,boxes --output '" + (dir / "bad.csv").string() + "'");
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("'boxes'") != std::string::npos);
  CHECK(bad.output.find("its outputs: logits") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "bad.csv"));

  const auto plain = predict(dir, "--outputs logits --output '" + (dir / "plain.csv").string() + "'");
  const auto tta = predict(dir, "--tta hflip --output '" + (dir / "tta.csv").string() + "'");
  INFO(plain.output << tta.output);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(tta.exit_code == 0);
  CHECK(tta.output.find("(hflip TTA)") != std::string::npos);
  CHECK(tp::test::read_text(dir / "plain.csv") != tp::test::read_text(dir / "tta.csv"));
  // Still consistent rows: argmax and probability of the averaged logits.
  const auto check = python_check(203, "-", "'" + (dir / "tta.csv").string() + "'");
  INFO(check.output);
  CHECK(check.exit_code == 0);
  // By default the TTA rows get their own file, beside the plain predictions, not over them.
  fs::remove(dir / "predictions_val_last.csv");
  fs::remove(dir / "predictions_val_last_tta-hflip.csv");
  REQUIRE(predict(dir, "").exit_code == 0);
  REQUIRE(predict(dir, "--tta hflip").exit_code == 0);
  CHECK(tp::test::read_text(dir / "predictions_val_last.csv") != tp::test::read_text(dir / "predictions_val_last_tta-hflip.csv"));

  const auto typo = predict(dir, "--format parquet");
  CHECK(typo.exit_code == 2);
  CHECK(typo.output.find("csv, jsonl, npy or png") != std::string::npos);
}

TEST_CASE("host predict: bad samples follow data.on_bad_sample; --split train; --weights ema") {
  // c_regression (the C fixture) fails to load samples 5, 6 and 7 of its train split.
  const fs::path dir = tp::test::fresh_dir("predict_bad_samples");
  const std::string common = "--config tests/integration/c_regression.toml --plugin-dir '" +
                             std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() +
                             "' --set 'progress.mode=\"off\"' --set data.train.size=40 --set data.train.fail_first=5 "
                             "--set data.train.fail_count=3 --set 'data.on_bad_sample=\"skip\"' --set ema.enabled=true "
                             "--set train.epochs=2 --set train.batch_size=8 ";
  const auto trained = tp::test::run_host(common);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const fs::path live = dir / "train_live.csv", ema = dir / "train_ema.csv";
  const auto skip = tp::test::run_host("predict " + common + "--checkpoint last --split train --output '" +
                                       live.string() + "'");
  INFO(skip.output);
  REQUIRE(skip.exit_code == 0);
  CHECK(skip.output.find("3 samples were skipped") != std::string::npos);
  CHECK(skip.output.find("reads the training split as training does, augmentation included") != std::string::npos);
  // Each left-out sample named with its error (the summary's count alone named none).
  for (const char* named : {"index 5: ", "index 6: ", "index 7: "}) CHECK(skip.output.find(named) != std::string::npos);
  // 37 rows, in index order, without 5, 6 and 7.
  std::istringstream rows(tp::test::read_text(live));
  std::string line;
  std::getline(rows, line);
  CHECK(line.starts_with("index,"));
  // The regression target y is of shape [1]: one value per sample, a column (it was left out).
  CHECK(line.ends_with(",y"));
  std::vector<int> indices;
  while (std::getline(rows, line)) indices.push_back(std::stoi(line.substr(0, line.find(','))));
  REQUIRE(indices.size() == 37);
  CHECK(indices[4] == 4);
  CHECK(indices[5] == 8);
  CHECK(std::is_sorted(indices.begin(), indices.end()));
  // The averaged weights predict other values than the live ones, for the same rows.
  const auto averaged = tp::test::run_host("predict " + common + "--checkpoint last --split train --weights ema "
                                           "--output '" + ema.string() + "'");
  INFO(averaged.output);
  REQUIRE(averaged.exit_code == 0);
  CHECK(tp::test::read_text(ema) != tp::test::read_text(live));
  // data.on_bad_sample = "fail": the first bad sample stops the prediction, and no file is left.
  const auto failed = tp::test::run_host("predict " + common + "--set 'data.on_bad_sample=\"fail\"' --checkpoint last "
                                         "--split train --output '" + (dir / "failed.csv").string() + "'");
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK(failed.output.find("failed on sample 5") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "failed.csv"));

  // Two ranks, one bad sample (9, which rank 1 reads: ranks take whole batches of 8 in turn, so
  // rank 1 the second, samples 8 to 15): with "skip" only rank 1 skips, and the file
  // equals one rank's; with "fail" rank 0 stops too, at once, with rank 1's message, and no file is
  // left (issue 41: rank-asymmetric failures in predict).
  const std::string one_bad = "--set data.train.fail_first=9 --set data.train.fail_count=1 --checkpoint last --split train ";
  const fs::path single = dir / "single.csv", pair = dir / "pair.csv";
  const auto one_rank = tp::test::run_host("predict " + common + one_bad + "--output '" + single.string() + "'");
  INFO(one_rank.output);
  REQUIRE(one_rank.exit_code == 0);
  const auto two_ranks =
      tp::test::run_host("--nproc-per-node 2 predict " + common + one_bad + "--output '" + pair.string() + "'");
  INFO(two_ranks.output);
  REQUIRE(two_ranks.exit_code == 0);
  CHECK(two_ranks.output.find("1 sample was skipped") != std::string::npos);
  CHECK(two_ranks.output.find("rank 1: predict: samples left out") != std::string::npos); // named by rank 1,
  CHECK(two_ranks.output.find("index 9: ") != std::string::npos);                          // which read it
  CHECK(tp::test::read_text(single) == tp::test::read_text(pair));
  const auto start = std::chrono::steady_clock::now();
  const auto one_fails = tp::test::run_host("--nproc-per-node 2 predict " + common + one_bad +
                                            "--set 'data.on_bad_sample=\"fail\"' --output '" +
                                            (dir / "failed_pair.csv").string() + "'");
  INFO(one_fails.output);
  CHECK(one_fails.exit_code == 1);
  CHECK(one_fails.output.find("[rank 0] host: error: prediction stopped: rank 1: data loader: source "
                              "'org.torchhost.test.c_regression (train)' failed on sample 9") != std::string::npos);
  // Both ranks exit 1; the launcher names whichever it reaps first.
  CHECK(one_fails.output.find("host: predict failed: rank ") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "failed_pair.csv"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));  // nobody waited for dist.timeout_s
}

TEST_CASE("host predict on 2 ranks whose columns differ: every rank stops at once with rank 0's refusal") {
  // verify_data's "rank_label" gives `label` as float32 on rank 1 and int64 on rank 0: rank 0
  // refuses to merge the round inside the round's agreement, so rank 1 does not wait in the next
  // gather for a rank that left (issue 42, section 2).
  const fs::path dir = tp::test::fresh_dir("predict_rank_columns");
  const std::string fixture = "--config tests/verify/fixture.toml --plugin-dir '" +
                              std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() + "' ";
  const auto trained = tp::test::run_host(fixture);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto start = std::chrono::steady_clock::now();
  const auto refused = tp::test::run_host("--nproc-per-node 2 predict " + fixture +
                                          "--checkpoint last --set 'data.train.defect=\"rank_label\"' --output '" +
                                          (dir / "p.csv").string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == 1);
  const std::string refusal = "predictions: rank 1 produced the columns ";
  CHECK(refused.output.find("[rank 0] host: error: " + refusal) != std::string::npos);
  CHECK(refused.output.find("[rank 1] host: error: prediction stopped: rank 0: " + refusal) != std::string::npos);
  CHECK(refused.output.find("label float32") != std::string::npos);
  CHECK(refused.output.find("label int64") != std::string::npos);
  CHECK(refused.output.find("no longer answer") == std::string::npos);
  CHECK_FALSE(fs::exists(dir / "p.csv"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60)); // nobody waited for dist.timeout_s
}

TEST_CASE("host predict: fsync before the rename, no partial file after SIGINT, stale temporaries swept") {
  const fs::path& dir = trained_run();
  // Temporaries of writers killed earlier (pid 99999999 is above any pid_max) anywhere in the run
  // directory, and one of a process that still runs (this test's).
  const std::vector<fs::path> stale{dir / "old.csv.k3J9sQx0Lm2B.partial-99999999",
                                    dir / "checkpoints" / ".pending-99999999.pt",
                                    dir / "plots" / ".loss.png.k3J9sQx0Lm2B.tmp-99999999",
                                    dir / "new.csv.k3J9sQx0Lm2B.partial-99999999",
                                    dir / "checkpoints" / ".last.pt.k3J9sQx0Lm2B.tmp-99999999"};
  const fs::path live = dir / ("live.csv.k3J9sQx0Lm2B.partial-" + std::to_string(::getpid()));
  // Names without the host's random part are a user's own files, never swept (security trial F14).
  const std::vector<fs::path> users{dir / "figures.partial-99999999", dir / "checkpoints" / ".notes.tmp-99999999"};
  for (const fs::path& file : stale) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "left by a killed writer";
  }
  for (const fs::path& file : users) std::ofstream(file) << "the user's";
  std::ofstream(live) << "still being written";

  // 1. The file is fsynced under its partial name, renamed, then the directory is fsynced (strace
  //    -y names each descriptor's file), so a power cut cannot leave an empty final file.
  const fs::path output = dir / "synced.csv", trace = dir / "predict.strace";
  // LeakSanitizer cannot run under ptrace (the sanitize preset): the other cases check predict's
  // leaks.
  const bool traced = tp::test::run_shell("strace -o /dev/null true").exit_code == 0;
  const std::string strace = "ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" strace -f --seccomp-bpf -y -qq "
                             "-e signal=none -e trace=fsync,rename,renameat,renameat2 -o '" + trace.string() + "' ";
  const auto run = tp::test::run_shell((traced ? strace : std::string()) +
                                       "'" + tp::test::build_dir() + "/bin/host' predict --output-dir '" + dir.string() +
                                       "' " + kConfig + "--checkpoint last --output '" + output.string() + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const fs::path& file : stale) CHECK_MESSAGE(!fs::exists(file), "not swept: " << file);
  for (const fs::path& file : users) CHECK_MESSAGE(fs::exists(file), "swept: " << file);
  CHECK(run.output.find("removed " + stale.front().string() + ", left by a process that no longer runs") !=
        std::string::npos);
  CHECK(fs::exists(live)); // its writer runs
  fs::remove(live);
  if (traced) {
    std::istringstream lines(tp::test::read_text(trace));
    int at = 0, file_synced = -1, renamed = -1, dir_synced = -1;
    for (std::string line; std::getline(lines, line); ++at) {
      const std::size_t named = line.find(output.string() + ".");
      const bool partial = named != std::string::npos && line.find(".partial-", named) != std::string::npos;
      if (partial && line.find("fsync(") != std::string::npos) file_synced = at;
      const bool to_final = line.find("\"" + output.string() + "\"") != std::string::npos;
      if (partial && to_final && line.find("rename") != std::string::npos) renamed = at;
      if (renamed >= 0 && dir_synced < 0 && line.find("fsync(") != std::string::npos &&
          line.find("<" + dir.string() + ">") != std::string::npos)
        dir_synced = at;
    }
    INFO(tp::test::read_text(trace));
    CHECK(file_synced >= 0);
    CHECK(renamed > file_synced);
    CHECK(dir_synced > renamed);
  } else {
    MESSAGE("strace cannot run here: the fsync order is not checked");
  }

  // 2. SIGINT in the middle of a long prediction (20,000 samples, about 3 s): the host stops at
  //    the next round, removes the partial file and exits 130; no file under the final name.
  const fs::path interrupted = dir / "interrupted.csv";
  const auto stopped = tp::test::run_shell(
      "'" + std::string(tp::test::build_dir()) + "/bin/host' predict --output-dir '" + dir.string() + "' " + kConfig +
      "--set data.train.val_size=20000 --checkpoint last --output '" + interrupted.string() + "' & pid=$!; " +
      "for i in $(seq 1 3000); do ls '" + interrupted.string() + "'.*.partial-* >/dev/null 2>&1 && break; sleep 0.02; " +
      "done; sleep 0.3; kill -INT $pid; wait $pid; echo \"exit=$?\"");
  INFO(stopped.output);
  CHECK(stopped.output.find("exit=130") != std::string::npos);
  CHECK(stopped.output.find("host predict stopped by signal 2 after ") != std::string::npos);
  CHECK_FALSE(fs::exists(interrupted));
  CHECK(tp::test::temporaries_below(dir) == "");
}

TEST_CASE("host predict and host export write regular files only: a FIFO or a directory at --output is refused") {
  const fs::path& dir = trained_run();
  // A FIFO stands in for a device node (/dev/null): rename(2) would replace the node itself.
  const fs::path fifo = dir / "a_fifo";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const fs::path folder = dir / "a_folder";
  fs::create_directories(folder);
  // The three formats share one writer and its check (PredictionWriter): each target gets two of them.
  const std::pair<fs::path, const char*> attempts[] = {{fifo, "csv"}, {fifo, "npy"}, {folder, "jsonl"}, {folder, "csv"}};
  for (const auto& attempt : attempts) {
    const fs::path& target = attempt.first;
    const std::string format = attempt.second;
    const auto run = predict(dir, "--format " + format + " --output '" + target.string() + "'");
    INFO(format, " into ", target, ": ", run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find("--output " + target.string() + " is a") != std::string::npos);
  }
  for (const fs::path& target : {fifo, folder}) {
    const auto exported = tp::test::run_host("export --checkpoint '" + (dir / "checkpoints" / "last.pt").string() +
                                             "' --format safetensors --output '" + target.string() + "'");
    INFO(exported.output);
    CHECK(exported.exit_code == 2);
  }
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  CHECK(fs::is_directory(folder));
  CHECK(fs::is_empty(folder));
  CHECK(tp::test::temporaries_below(dir) == "");
  fs::remove(fifo);
}

TEST_CASE("host predict --images DIR with a dataset that declares `files` but no `extensions`: image_folder's endings") {
  // Before, such a dataset got no endings at all: "the directory ... holds no image file", always
  // (docs/plugin_sdk.md, "New files"). prepare_probe declares `files` and no `extensions`.
  const fs::path dir = tp::test::fresh_dir("predict_images_files_only");
  const std::string run = "--config tests/predict/prepare_probe.toml --plugin-dir '" +
                          std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + (dir / "run").string() +
                          "' --set 'data.train.log=\"" + (dir / "calls.log").string() + "\"' ";
  const auto train = tp::test::run_host("train " + run);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const fs::path images = dir / "new";
  fs::create_directories(images / "sub");
  for (const char* name : {"a.JPG", "c.png", "sub/b.webp", "notes.txt", "d.tiff", "e.heic"}) std::ofstream(images / name) << "x";
  const fs::path out = dir / "images.csv";
  const auto predicted = tp::test::run_host("predict " + run + "--checkpoint last --images '" + images.string() +
                                            "' --output '" + out.string() + "'");
  INFO(predicted.output);
  REQUIRE(predicted.exit_code == 0);
  std::vector<std::string> paths;
  std::istringstream rows(tp::test::read_text(out));
  for (std::string line; std::getline(rows, line);)
    if (!line.empty() && line.front() != '#' && line.rfind("index,", 0) != 0)
      paths.push_back(line.substr(line.find(',') + 1, line.find(',', line.find(',') + 1) - line.find(',') - 1));
  // torchvision's IMG_EXTENSIONS (.tiff among them since data trial F2), not .heic or .txt.
  CHECK(paths == std::vector<std::string>{"a.JPG", "c.png", "d.tiff", "sub/b.webp"});
  // Nothing such a dataset would read: the message names the endings and where they come from.
  fs::remove_all(images);
  fs::create_directories(images);
  std::ofstream(images / "notes.txt") << "x";
  const auto none = tp::test::run_host("predict " + run + "--checkpoint last --images '" + images.string() + "'");
  INFO(none.output);
  CHECK(none.exit_code == 2);
  CHECK(tp::test::contains(none.output,
                           "holds no image file (ending in .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case: "));
}

TEST_CASE("host predict refuses a model output that is not one row per sample, naming the model") {
  // verify_model's flat_output defect returns eval-mode logits as [B * 3]. Before, predict wrote
  // B rows from the first B values: sample 0's three logits became rows 0, 1 and 2, exit 0.
  const fs::path dir = tp::test::fresh_dir("predict_flat_output");
  const std::string common = "--config tests/verify/fixture.toml --plugin-dir '" +
                             std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + dir.string() + "' ";
  const auto trained = tp::test::run_host(common);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto flat = tp::test::run_host("predict " + common + "--checkpoint last --set 'model.defect=\"flat_output\"' "
                                       "--output '" + (dir / "flat.csv").string() + "'");
  INFO(flat.output);
  CHECK(flat.exit_code == 1);
  CHECK(flat.output.find("output 'logits' of model org.torchhost.test.verify_model has shape [48] for a batch of 16 "
                         "samples") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "flat.csv"));
}

TEST_CASE("host predict pads a short batch no further than the split: eval.batch_size far above it costs nothing") {
  // Security trial F11: a short batch was padded to eval.batch_size whatever the split's size, so
  // one image with a large eval batch ran that many images' network (18 GB for 8 images at
  // 50,000); at 100,000,000 the allocation failed, exit 1. The test split has 101 samples.
  const fs::path& dir = trained_run();
  const fs::path big = dir / "big_batch.csv", usual = dir / "usual_batch.csv";
  const auto huge = predict(dir, "--split test --set eval.batch_size=100000000 --output '" + big.string() + "'");
  INFO(huge.output);
  REQUIRE(huge.exit_code == 0);
  const auto normal = predict(dir, "--split test --output '" + usual.string() + "'");
  REQUIRE(normal.exit_code == 0);
  // The same predicted classes, row for row (the logits' last bits may follow the batch size).
  const auto argmax_column = [](const fs::path& file) {
    std::vector<std::string> classes;
    std::istringstream rows(tp::test::read_text(file));
    std::string header;
    while (std::getline(rows, header) && header.front() == '#') {}
    std::vector<std::string> names;
    std::istringstream fields(header);
    for (std::string field; std::getline(fields, field, ',');) names.push_back(field);
    const auto at = std::find(names.begin(), names.end(), "logits.argmax") - names.begin();
    for (std::string line; std::getline(rows, line);) {
      std::istringstream cells(line);
      std::string cell;
      for (std::ptrdiff_t i = 0; i <= at && std::getline(cells, cell, ','); ++i) {}
      classes.push_back(cell);
    }
    return classes;
  };
  const std::vector<std::string> classes = argmax_column(big);
  CHECK(classes.size() == 101);
  CHECK(classes == argmax_column(usual));
}

TEST_CASE("host predict leaves a run directory's temporaries alone while a training holds its run.lock") {
  // Security trial F19: a `host predict` in another pid namespace (another node, another
  // container) took a live training's temporary for a dead writer's (kill(pid, 0) sees only its
  // own namespace), removed it, and the training died at its rename. A training holds run.lock
  // (flock, which other nodes and containers see): while it does, predict sweeps nothing there.
  const fs::path& dir = trained_run();
  const fs::path left = dir / "plots" / ".lr.png.k3J9sQx0Lm2B.tmp-99999999";
  fs::create_directories(left.parent_path());
  std::ofstream(left) << "a temporary whose writer this process cannot see";
  const fs::path output = dir / "while_training.csv";
  const auto held = tp::test::run_shell("flock '" + (dir / "run.lock").string() + "' '" + tp::test::build_dir() +
                                        "/bin/host' predict --output-dir '" + dir.string() + "' " + kConfig +
                                        "--checkpoint last --output '" + output.string() + "'");
  INFO(held.output);
  REQUIRE(held.exit_code == 0);
  CHECK(fs::exists(left));
  CHECK(held.output.find("a training holds " + (dir / "run.lock").string()) != std::string::npos);
  const auto free = predict(dir, "--output '" + output.string() + "'");
  INFO(free.output);
  REQUIRE(free.exit_code == 0);
  CHECK_FALSE(fs::exists(left));
}
