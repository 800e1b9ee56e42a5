// A third-party plugin author's view (issue 12, section 7), end to end through `host`:
// `host plugins check` is a validator (both splits, first/last/random indices, stable fields,
// DLPack deleters, an index past the end, crashes named with exit 5, options from --set or
// --config), the training crash message's check command reproduces the crash, and a run
// directory's config.toml records the directories the run really used, so `host eval` works from
// it anywhere.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tp/framework/error.h"
#include "tp/framework/plugin/plugin_crash.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::test::contains;

std::string fixture(const std::string& name) {
  return std::string(tp::test::check_plugin_dir()) + "/" + name + "/" + name + ".so";
}

tp::test::HostRun check(const std::string& name, const std::string& args = "") {
  return tp::test::run_host("plugins check '" + fixture(name) + "' " + args);
}

}  // namespace

TEST_CASE("plugins check passes a correct dataset, reading both splits and a scalar field with no shape") {
  const auto run = check("ck_good");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.output, "[ok] org.test.ck_good: train: 20 samples"));
  CHECK(contains(run.output, "val: 10 samples"));
  CHECK(contains(run.output, "fields x float32[4], label int64[]"));
  CHECK(contains(run.output, "index 20 refused"));
  CHECK(contains(run.output, "destroy(NULL) safe"));
  // --index reads more samples; one past the end of a split is named, not silently dropped.
  const auto more = check("ck_good", "--index 15 --index 12");
  INFO(more.output);
  CHECK(more.exit_code == 0);
  CHECK(contains(more.output, "(--index 15, 12 past the end, not read)")); // val holds 10
}

TEST_CASE("plugins check reads the test split of a dataset that serves one, and says when one has none") {
  const auto good = check("ck_good");
  INFO(good.output);
  CHECK(good.exit_code == 0);
  CHECK(contains(good.output, "; test: 20 samples, "));
  const auto none = check("ck_required_key", "--set root=/data");
  INFO(none.output);
  CHECK(none.exit_code == 0);
  CHECK(contains(none.output, "index 10 refused; no test split; destroy(NULL) safe"));
  CHECK_FALSE(contains(none.output, "test: "));
}

TEST_CASE("plugins check warns about a float scalar named like a class label, exit 0") {
  const auto run = check("ck_float_label");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.output, "[ok] org.test.ck_float_label: train: 20 samples"));
  CHECK(contains(run.output, "[warn] org.test.ck_float_label: field 'label' is a float32 scalar (split 'train'); a "
                             "class label needs an integer dtype: cross_entropy, accuracy and f1 read class indices "
                             "and refuse it. Give it as int64"));
  CHECK(contains(run.output, "1 checked, 0 failed, 0 not created for want of options, 1 warning(s)"));
  // Once per field, not once per split; and an int64 label is no warning.
  CHECK(run.output.find("[warn]") == run.output.rfind("[warn]"));
  CHECK_FALSE(contains(check("ck_good").output, "[warn]"));
}

TEST_CASE("plugins check fails each broken dataset, naming the component, the call, the split and the index") {
  struct Case {
    const char* name;
    std::vector<std::string> expected;
  };
  const Case cases[] = {
      {"ck_val_fails", {"create on split 'val' failed with TP_ERR_IO", "the val files are missing"}},
      {"ck_sample_fails", {"get_sample at index 19 of split 'train' failed with TP_ERR_IO", "the last file is truncated"}},
      {"ck_shape_varies", {"get_sample at index 19 of split 'train' gave x float32[5]", "but index 0 gave x float32[4]"}},
      {"ck_dtype_varies", {"get_sample at index 19 of split 'train' gave x float64[4]", "but index 0 gave x float32[4]"}},
      {"ck_null_deleter", {"get_sample at index 0 of split 'train': field 1 ('label') has a NULL DLPack deleter"}},
      {"ck_no_range_check", {"get_sample at index 20 of split 'train' (size() is 20) returned TP_OK"}},
      {"ck_dup_field", {"get_sample at index 0 of split 'train': field 1 ('x') repeats the name of field 0"}},
  };
  for (const Case& c : cases) {
    const auto run = check(c.name);
    INFO(run.output);
    CHECK_MESSAGE(run.exit_code == tp::kExitRuntime, c.name);
    CHECK(contains(run.output, std::string("[FAIL] org.test.") + c.name + ": "));
    for (const std::string& part : c.expected) CHECK_MESSAGE(contains(run.output, part), part);
    CHECK(contains(run.output, "1 checked, 1 failed"));
  }
}

TEST_CASE("plugins check reports a crash in get_sample or destroy(NULL) as training does: exit 5, component and call") {
  const auto sample = check("ck_sample_crash");
  INFO(sample.output);
  CHECK(sample.exit_code == tp::kExitPluginCrash);
  CHECK(contains(sample.output, "component 'org.test.ck_sample_crash' crashed the process with SIGSEGV"));
  CHECK(contains(sample.output, "in get_sample on split 'val' (sample index 9)"));

  const auto destroy = check("ck_destroy_null");
  INFO(destroy.output);
  CHECK(destroy.exit_code == tp::kExitPluginCrash);
  CHECK(contains(destroy.output, "component 'org.test.ck_destroy_null' crashed the process with SIGSEGV"));
  CHECK(contains(destroy.output, "in destroy(NULL)"));
  CHECK(contains(destroy.output, "ck_destroy_null.so: plugin 'ck_destroy_null'")); // what ran before is out
}

TEST_CASE("a component with a required key is skipped without options, and checked with --set or --config") {
  const auto bare = check("ck_required_key");
  INFO(bare.output);
  CHECK(bare.exit_code == 0);
  CHECK(contains(bare.output, "[skip] org.test.ck_required_key: not created: no value for required key(s) root"));
  CHECK(contains(bare.output, "0 checked, 0 failed, 1 not created"));

  const auto set = check("ck_required_key", "--set root=/data --set size=7");
  INFO(set.output);
  CHECK(set.exit_code == 0);
  CHECK(contains(set.output, "[ok] org.test.ck_required_key: train: 7 samples"));

  const auto unknown = check("ck_required_key", "--set rot=/data");
  INFO(unknown.output);
  CHECK(unknown.exit_code == tp::kExitConfig);
  CHECK(contains(unknown.output, "declares the key 'rot'"));

  // A run's config gives the options: data.train for "train", data.val for "val".
  const auto dir = tp::test::fresh_dir("check_config");
  const auto config = dir / "run.toml";
  std::ofstream(config) << "[data.train]\ncomponent = \"org.test.ck_required_key\"\nroot = \"/data\"\nsize = 5\n"
                           "[data.val]\ncomponent = \"org.test.ck_required_key\"\nroot = \"/data\"\nval_size = 3\n"
                           "[model]\ncomponent = \"org.torchhost.mlp\"\n[loss]\ncomponent = \"org.torchhost.mse\"\n";
  const auto from_config = check("ck_required_key", "--config '" + config.string() + "' --set data.train.size=6");
  INFO(from_config.output);
  CHECK(from_config.exit_code == 0);
  CHECK(contains(from_config.output, "[ok] org.test.ck_required_key: train: 6 samples"));
  CHECK(contains(from_config.output, "val: 3 samples"));
}

TEST_CASE("plugins check --config resolves a relative path key beside the config file, from any directory") {
  // As a run does (plugin_api/README.md, lifecycle): before, the check passed the value on as
  // written, so the plugin opened it against the working directory and failed from anywhere else.
  const auto dir = tp::test::fresh_dir("check_path_key");
  std::filesystem::create_directories(dir / "cfg");
  std::filesystem::create_directories(dir / "elsewhere");
  std::ofstream(dir / "cfg" / "samples.txt") << "beside the config\n";
  std::ofstream(dir / "elsewhere" / "here.txt") << "in the working directory\n";
  std::ofstream(dir / "cfg" / "run.toml") << "[data.train]\ncomponent = \"org.test.ck_path_key\"\nlist = \"samples.txt\"\n"
                                             "[model]\ncomponent = \"org.torchhost.mlp\"\n"
                                             "[loss]\ncomponent = \"org.torchhost.mse\"\n";
  const std::string check_from_elsewhere = "cd '" + (dir / "elsewhere").string() + "' && '" + tp::test::build_dir() +
                                           "/bin/host' plugins check '" + fixture("ck_path_key") + "' --config ../cfg/run.toml";
  const auto beside = tp::test::run_shell(check_from_elsewhere);
  INFO(beside.output);
  CHECK(beside.exit_code == 0);
  CHECK(contains(beside.output, "[ok] org.test.ck_path_key: train: 20 samples"));
  // A --set value stays relative to the working directory, as a shell argument is.
  const auto set = tp::test::run_shell(check_from_elsewhere + " --set 'data.train.list=\"here.txt\"'");
  INFO(set.output);
  CHECK(set.exit_code == 0);
  const auto missing = tp::test::run_shell(check_from_elsewhere + " --set 'data.train.list=\"samples.txt\"'");
  INFO(missing.output);
  CHECK(missing.exit_code == tp::kExitRuntime);
  CHECK(contains(missing.output, "cannot open list '" + (dir / "elsewhere" / "samples.txt").string() + "'"));
}

TEST_CASE("the training crash message's `host plugins check` command reproduces the crash") {
  const auto dir = tp::test::fresh_dir("check_reproduce");
  const std::string plugin_dir = std::string(tp::test::bad_plugin_dir()) + "/segfault";
  const auto run = tp::test::run_host("--config tests/crash/segfault.toml --plugin-dir '" + plugin_dir +
                                      "' --output-dir '" + dir.string() + "' --set data.num_workers=0");
  INFO(run.output);
  REQUIRE(run.exit_code == tp::kExitPluginCrash);
  // The command as printed, library and epoch included (it said `<its .so>` and "add --epoch E";
  // without the epoch the printed command passed). The crash came in the run's second epoch:
  // ctx.epoch 1, which is plugins check's --epoch.
  const std::string command = "`host plugins check " + plugin_dir + "/segfault.so --config " +
                              (dir / "config.toml").string() + " --index 13 --epoch 1`";
  CHECK(contains(run.output, command));
  CHECK(contains(run.output, "in get_sample (sample index 13, epoch 2)"));

  // Run as printed; config.toml names the plugin's options and directory.
  const auto again = tp::test::run_shell(std::string(tp::test::build_dir()) + "/bin/" +
                                         command.substr(1, command.size() - 2));
  INFO(again.output);
  CHECK(again.exit_code == tp::kExitPluginCrash);
  CHECK(contains(again.output, "component 'org.test.segfault' crashed the process with SIGSEGV"));
  CHECK(contains(again.output, "in get_sample on split 'train' (sample index 13)"));
  // In epoch 0 the same sample reads fine.
  const auto epoch0 = tp::test::run_host("plugins check '" + plugin_dir + "/segfault.so' --config '" +
                                         (dir / "config.toml").string() + "' --index 13");
  INFO(epoch0.output);
  CHECK(epoch0.exit_code == 0);
}

TEST_CASE("config.toml records --output-dir and --plugin-dir; host eval runs from it in another directory") {
  const auto dir = tp::test::fresh_dir("self_contained_run");
  // Relative to the source directory, where run_host starts: the file must not keep it relative.
  const auto relative_dir = std::filesystem::relative(dir, tp::test::source_dir()).string();
  const auto run = tp::test::run_host("--config tests/integration/c_regression.toml --plugin-dir '" +
                                      std::string(tp::test::fixture_plugin_dir()) + "' --output-dir '" + relative_dir +
                                      "' --set train.epochs=1 --set progress.mode=\"off\"");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string recorded = tp::test::read_text(dir / "config.toml");
  INFO(recorded);
  const std::string absolute = std::filesystem::absolute(dir).lexically_normal().string();
  CHECK((contains(recorded, "output_dir = '" + absolute + "'") || contains(recorded, "output_dir = \"" + absolute + "\"")));
  CHECK(contains(recorded, std::filesystem::path(tp::test::fixture_plugin_dir()).lexically_normal().string()));
  CHECK_FALSE(contains(recorded, "runs/c_regression"));

  const auto elsewhere = tp::test::fresh_dir("self_contained_eval_cwd");
  const auto eval = tp::test::run_shell("cd '" + elsewhere.string() + "' && '" + tp::test::build_dir() +
                                        "/bin/host' eval --config '" + (dir / "config.toml").string() +
                                        "' --checkpoint best");
  INFO(eval.output);
  CHECK(eval.exit_code == 0);
  CHECK(std::filesystem::exists(dir / "eval_best.json"));
  CHECK_FALSE(std::filesystem::exists(elsewhere / "runs"));
}
