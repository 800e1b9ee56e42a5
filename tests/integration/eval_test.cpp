// `host eval` evaluates a checkpoint with what evaluation needs (evaluate_checkpoint, issue 61
// part 2): the training split, the optimizer and the schedule are not built, so settings that only
// training reads cannot stop it, and its eval_<checkpoint>.json is JSON whatever the checkpoint's
// path holds. The numbers themselves are the run's (train_e2e_test, weight_average_test,
// bn_stats_test and verify's distributed check compare them).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "host_runner.h"

#include <doctest/doctest.h>

namespace {

// A one-epoch quickstart run with a validation split: a few seconds.
std::filesystem::path trained_run(const std::string& name) {
  const auto dir = tp::test::fresh_dir(name);
  const auto trained = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                          "' --set train.epochs=1 --set data.train.size=640 "
                                          "--set data.train.val_size=200 --set progress.mode=\"off\"");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  return dir;
}

std::string eval_args(const std::filesystem::path& dir, const std::string& checkpoint) {
  return "eval --config '" + (dir / "config.toml").string() + "' --output-dir '" + dir.string() + "' --checkpoint '" +
         checkpoint + "' ";
}

// The file's object, its keys in file order.
nlohmann::ordered_json read_json(const std::filesystem::path& file) {
  const std::string text = tp::test::read_text(file);
  INFO(file.string(), ": ", text);
  REQUIRE(nlohmann::ordered_json::accept(text));
  return nlohmann::ordered_json::parse(text);
}

}  // namespace

TEST_CASE("host eval builds nothing of training: a training batch larger than the split and a schedule "
          "that cannot be built do not stop it, and the values are the same") {
  const auto dir = trained_run("eval_without_training");
  const auto plain = tp::test::run_host(eval_args(dir, "last"));
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  const nlohmann::ordered_json expected = read_json(dir / "eval_last.json");
  // The Trainer host eval built refused each at construction (exit 2): not one full training
  // batch per epoch, a warm-up longer than the training. Evaluation reads neither; eval.batch_size
  // keeps the evaluation's batches (and so its sums) those of the run.
  for (const std::string set : {"--set train.batch_size=100000 --set eval.batch_size=64",
                                "--set schedule.name=\"cosine\" --set schedule.warmup_steps=100000"}) {
    const auto unbuilt = tp::test::run_host(eval_args(dir, "last") + set + " --set eval.strategy=\"no\"");
    INFO(set, ": ", unbuilt.output);
    REQUIRE(unbuilt.exit_code == 0);
    const nlohmann::ordered_json values = read_json(dir / "eval_last.json");
    for (const char* key : {"val/loss", "val/accuracy", "val/f1"}) {
      CAPTURE(key);
      CHECK(values.at(key).get<double>() == expected.at(key).get<double>()); // every digit
    }
  }
}

TEST_CASE("eval_<checkpoint>.json is JSON when the checkpoint's path holds a quote and a backslash") {
  const auto dir = trained_run("eval_odd_path");
  const auto odd = dir / "checkpoints" / "odd \"quoted\" back\\slash.pt";
  std::filesystem::copy_file(dir / "checkpoints" / "last.pt", odd);
  const auto eval = tp::test::run_host(eval_args(dir, odd.string()));
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  const nlohmann::ordered_json json = read_json(dir / "eval_odd \"quoted\" back\\slash.json");
  CHECK(json.at("checkpoint").get<std::string>() == odd.string());
  CHECK(json.at("weights").get<std::string>() == "live");
  CHECK(json.at("split").get<std::string>() == "val");
  CHECK(json.at("epoch").get<int64_t>() == 1);
  CHECK(json.at("val/accuracy").get<double>() >= 0.0);
  // What was evaluated first, then the values in the order they were produced.
  std::string keys;
  for (const auto& [key, value] : json.items()) keys += key + " ";
  CHECK(keys == "checkpoint epoch step weights split config_changes val/loss val/accuracy val/f1 ");
  CHECK(json.at("config_changes") == nlohmann::ordered_json::array()); // the run's own config.toml
}

// A trial evaluated a COCO run on another annotation file with --set: the result replaced the
// run's own eval_best.json, and nothing in it told the two apart.
TEST_CASE("host eval --output keeps the run's own record, and the results name what differs from training") {
  const auto dir = trained_run("eval_elsewhere");
  const auto own = tp::test::run_host(eval_args(dir, "last"));
  INFO(own.output);
  REQUIRE(own.exit_code == 0);
  const std::string record = tp::test::read_text(dir / "eval_last.json");
  const auto elsewhere = dir.parent_path() / "eval_elsewhere_other.json";
  const auto other = tp::test::run_host(eval_args(dir, "last") + "--set eval.batch_size=7 --output '" +
                                        elsewhere.string() + "'");
  INFO(other.output);
  REQUIRE(other.exit_code == 0);
  CHECK(tp::test::read_text(dir / "eval_last.json") == record);
  CHECK(other.output.find("configured otherwise than the checkpoint's training") != std::string::npos);
  const nlohmann::ordered_json json = read_json(elsewhere);
  REQUIRE(json.at("config_changes").size() == 1);
  const std::string change = json.at("config_changes")[0].get<std::string>();
  CHECK(change.starts_with("eval.batch_size: "));
  CHECK(change.ends_with("7"));
  CHECK(json.at("val/accuracy").get<double>() == doctest::Approx(read_json(dir / "eval_last.json").at("val/accuracy").get<double>()));
  // A directory is no results file: refused before the evaluation, with the key to change.
  const auto refused = tp::test::run_host(eval_args(dir, "last") + "--output '" + dir.string() + "'");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("--output") != std::string::npos);
  CHECK(refused.output.find("val/accuracy") == std::string::npos);
}

TEST_CASE("a run directory moved elsewhere: eval says which directory it reads and how to point at the copy") {
  // Its config.toml records the place the run was trained in; before, eval read that one without a
  // word, or, when it was gone, refused with "use --resume auto".
  const auto dir = trained_run("eval_moved_from");
  const auto moved = tp::test::fresh_dir("eval_moved_to") / "run";
  std::filesystem::copy(dir, moved, std::filesystem::copy_options::recursive);
  const std::string from_copy = "eval --config '" + (moved / "config.toml").string() + "' --checkpoint last";
  const auto copied = tp::test::run_host(from_copy);
  INFO(copied.output);
  REQUIRE(copied.exit_code == 0);
  CHECK(copied.output.find("records run.output_dir = " + dir.string()) != std::string::npos);
  CHECK(copied.output.find("add --output-dir " + moved.string()) != std::string::npos);
  std::filesystem::remove_all(dir);
  const auto gone = tp::test::run_host(from_copy);
  INFO(gone.output);
  CHECK(gone.exit_code == 4);
  CHECK(gone.output.find("--checkpoint last: " + (dir / "checkpoints" / "last.pt").string() + " does not exist") !=
        std::string::npos);
  CHECK(gone.output.find("--resume auto") == std::string::npos);
  CHECK(tp::test::run_host(from_copy + " --output-dir '" + moved.string() + "'").exit_code == 0);
}

TEST_CASE("--checkpoint best of a run that keeps no best checkpoint names the setting and offers last") {
  // Migration trial F6: Lightning's ModelCheckpoint(save_top_k=0, save_last=True) mapped, then
  // `host eval` (default --checkpoint best) said best.pt was missing as if the run had been moved.
  const auto dir = tp::test::fresh_dir("eval_no_best");
  const auto trained = tp::test::run_host("--config configs/quickstart.toml --output-dir '" + dir.string() +
                                          "' --set train.epochs=1 --set data.train.size=256 "
                                          "--set data.train.val_size=64 --set checkpoint.save_top_k=0");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto best = tp::test::run_host("eval --config '" + (dir / "config.toml").string() + "'");
  INFO(best.output);
  CHECK(best.exit_code == 4);
  CHECK(best.output.find("keeps no best checkpoint (its checkpoint.save_top_k = 0") != std::string::npos);
  CHECK(best.output.find("Give --checkpoint last") != std::string::npos);
  CHECK(best.output.find("moved or copied") == std::string::npos);
  CHECK(tp::test::run_host("eval --config '" + (dir / "config.toml").string() + "' --checkpoint last").exit_code == 0);
}
