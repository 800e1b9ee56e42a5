// load_run_config: defaults, precedence, the typed RunConfig and the resolved table.
#include <filesystem>
#include <fstream>

#include "tp/framework/config/load.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/value.h"
#include "tp/framework/config/write.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::kRequiredComponents;
using tp::test::load_text;

TEST_CASE("defaults fill every host key") {
  const tp::RunConfig cfg = load_text(kRequiredComponents);

  CHECK(cfg.run.name == "run");
  CHECK(cfg.run.output_dir == "runs/run");
  CHECK(cfg.run.seed == 42);
  CHECK(cfg.run.device == "auto");
  CHECK(cfg.run.threads == 0);
  CHECK(cfg.train.epochs == 10);
  CHECK(cfg.train.batch_size == 32);
  CHECK(cfg.train.log_every_steps == 50);
  CHECK(cfg.train.drop_last);
  CHECK(cfg.eval.batch_size == 0);
  CHECK(cfg.eval.every == 1);
  CHECK(cfg.eval.strategy == tp::IntervalStrategy::kEpoch);
  CHECK(cfg.optim.name == "adamw");
  CHECK(cfg.optim.lr == doctest::Approx(1e-3));
  CHECK(cfg.optim.weight_decay == doctest::Approx(0.01));
  CHECK(cfg.optim.momentum == doctest::Approx(0.9));
  CHECK_FALSE(cfg.optim.nesterov);
  CHECK(cfg.optim.betas == std::vector<double>{0.9, 0.999});
  CHECK(cfg.optim.eps == doctest::Approx(1e-8));
  CHECK(cfg.data.num_workers == 2);
  CHECK(cfg.data.prefetch == 4);
  CHECK(cfg.data.shuffle);
  CHECK(cfg.data.val_from_train);
  CHECK(cfg.checkpoint.save_last);
  CHECK(cfg.checkpoint.save_top_k == 1);
  CHECK(cfg.checkpoint.monitor == "val/loss");
  CHECK(cfg.checkpoint.mode == "min");
  CHECK(cfg.progress.mode == "auto");
  CHECK(cfg.progress.every_seconds == doctest::Approx(10.0));
  CHECK(cfg.plugin_dirs.empty());

  CHECK(cfg.model.component == "m");
  CHECK(cfg.model.key_path == "model");
  CHECK(cfg.model.options.empty());
  CHECK(cfg.loss.component == "l");
  CHECK(cfg.data.train.component == "d");
  CHECK(cfg.data.train.key_path == "data.train");
  CHECK_FALSE(cfg.data.val.has_value());
  CHECK(cfg.metrics.empty());
  CHECK(cfg.callbacks.empty());
  CHECK(cfg.source.empty());

  // The resolved table holds every host key, with its declared type, and the components.
  for (const tp::KeySpec& spec : tp::host_key_schema()) {
    const toml::node* node = cfg.resolved.at_path(spec.path).node();
    REQUIRE_MESSAGE(node != nullptr, spec.path << " missing from resolved");
    CHECK_MESSAGE(tp::matches_type(*node, spec.type), spec.path);
  }
  CHECK(cfg.resolved.at_path("optim.lr").is_floating_point());
  CHECK(cfg.resolved.at_path("model.component").value<std::string>() == "m");
  CHECK(cfg.resolved.at_path("data.train.component").value<std::string>() == "d");
}

TEST_CASE("precedence: defaults < file < environment < --set") {
  const std::string file = "[train]\nbatch_size = 16\nepochs = 3\n" + kRequiredComponents;
  const std::map<std::string, std::string> env = {
      {"TP_TRAIN_BATCH_SIZE", "64"}, {"TP_OPTIM_LR", "3e-4"}, {"TP_RUN_DEVICE", "cuda:1"},
      {"TP_OPTIM_BETAS", "[0.8, 0.9]"}, {"TP_UNRELATED", "x"}, {"PATH", "/usr/bin"}};

  CHECK(load_text(kRequiredComponents).train.batch_size == 32);
  CHECK(load_text(file).train.batch_size == 16);

  const tp::RunConfig from_env = load_text(file, {}, env);
  CHECK(from_env.train.batch_size == 64);
  CHECK(from_env.train.epochs == 3); // the file still wins over the default
  CHECK(from_env.optim.lr == doctest::Approx(3e-4));
  CHECK(from_env.run.device == "cuda:1"); // not TOML, so taken as a string
  CHECK(from_env.optim.betas == std::vector<double>{0.8, 0.9});

  const tp::RunConfig from_set =
      load_text(file, {"train.batch_size=128", "train.batch_size=256"}, env);
  CHECK(from_set.train.batch_size == 256); // --set beats the environment; the last --set wins
  CHECK(from_set.resolved.at_path("train.batch_size").value<int64_t>() == 256);
}

TEST_CASE("process_environment reads environ") {
  ::setenv("TP_CONFIG_TEST_VARIABLE", "a=b", 1);
  const std::map<std::string, std::string> env = tp::process_environment();
  REQUIRE(env.count("TP_CONFIG_TEST_VARIABLE") == 1);
  CHECK(env.at("TP_CONFIG_TEST_VARIABLE") == "a=b");
}

TEST_CASE("a float key accepts an integer and stores a float") {
  const tp::RunConfig cfg = load_text("[optim]\nlr = 1\nbetas = [0, 0.5]\n" + kRequiredComponents);
  CHECK(cfg.optim.lr == 1.0);
  CHECK(cfg.optim.betas == std::vector<double>{0.0, 0.5});
  CHECK(cfg.resolved.at_path("optim.lr").is_floating_point());
  CHECK(cfg.resolved.at_path("optim.betas[0]").is_floating_point());
}

TEST_CASE("component tables keep their options for the plugin schema") {
  const tp::RunConfig cfg = load_text(
      "[model]\ncomponent = \"org.torchhost.small_cnn\"\nwidth = 8\n"
      "[loss]\ncomponent = \"l\"\n"
      "[data.train]\ncomponent = \"d\"\nsize = 100\n"
      "[data.val]\ncomponent = \"v\"\n"
      "[[metrics]]\ncomponent = \"org.torchhost.accuracy\"\ntop_k = 5\n"
      "[[metrics]]\ncomponent = \"m2\"\n"
      "[[callbacks]]\ncomponent = \"cb\"\n");
  CHECK(cfg.model.component == "org.torchhost.small_cnn");
  CHECK(cfg.model.options["width"].value<int64_t>() == 8);
  CHECK_FALSE(cfg.model.options.contains("component"));
  CHECK(cfg.data.train.options["size"].value<int64_t>() == 100);
  REQUIRE(cfg.data.val.has_value());
  CHECK(cfg.data.val->component == "v");
  CHECK(cfg.data.val->key_path == "data.val");
  REQUIRE(cfg.metrics.size() == 2);
  CHECK(cfg.metrics[0].key_path == "metrics[0]");
  CHECK(cfg.metrics[0].options["top_k"].value<int64_t>() == 5);
  CHECK(cfg.metrics[1].key_path == "metrics[1]");
  CHECK(cfg.metrics[1].component == "m2");
  REQUIRE(cfg.callbacks.size() == 1);
  CHECK(cfg.callbacks[0].component == "cb");
  // Options keep their source position for validate_component's messages.
  CHECK(cfg.model.options["width"].node()->source().begin.line == 3);
}

TEST_CASE("round trip through to_toml_text re-loads to the same RunConfig") {
  const tp::RunConfig cfg = load_text(
      "[run]\nname = \"trip\"\n[optim]\nname = \"sgd\"\nbetas = [0.5, 0.25]\n"
      "[[metrics]]\ncomponent = \"acc\"\ntop_k = 3\n[data.val]\ncomponent = \"v\"\n" +
          kRequiredComponents,
      {"optim.lr=0.30000000000000004", "plugins.dirs=[\"a\", \"b c\"]", "model.width=64",
       "progress.every_seconds=5"});
  const std::string text = tp::to_toml_text(cfg.resolved);
  const tp::RunConfig again = tp::load_run_config_from_string(text, "config.toml", {}, {});
  CHECK_MESSAGE(again == cfg, text);
  CHECK(again.optim.lr == 0.30000000000000004); // exact, not approximately
  CHECK(again.plugin_dirs == std::vector<std::string>{"a", "b c"});
  CHECK(tp::to_toml_text(again.resolved) == text);
}

TEST_CASE("load_run_config reads a file and names it in positions") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tp_config_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "run.toml";
  std::ofstream(file) << "[train]\nepochs = 2\n" << kRequiredComponents;

  const tp::RunConfig cfg = tp::load_run_config(file, {"train.batch_size=7"}, {});
  CHECK(cfg.source == file.string());
  CHECK(cfg.train.epochs == 2);
  CHECK(cfg.train.batch_size == 7);

  std::ofstream(file) << "[train]\nepochs = 0\n" << kRequiredComponents;
  const tp::ConfigError error =
      tp::test::expect_config_error([&] { tp::load_run_config(file, {}, {}); });
  CHECK(error.key_path() == "train.epochs");
  TP_CHECK_CONTAINS(std::string(error.what()), file.string() + ":2:10");
  std::filesystem::remove_all(dir);
}

TEST_CASE("train.init_weights written in a config file is found beside that file; --set is the shell's") {
  const std::string text = "[train]\ninit_weights = \"weights/w.pt\"\n" + kRequiredComponents;
  const tp::RunConfig from_file = tp::load_run_config_from_string(text, "exp/a/run.toml", {}, {});
  CHECK(from_file.train.init_weights == std::filesystem::absolute("exp/a/weights/w.pt").string());
  CHECK(from_file.resolved.at_path("train.init_weights").value_or(std::string()) == from_file.train.init_weights);
  const tp::RunConfig from_set =
      tp::load_run_config_from_string(text, "exp/a/run.toml", {"train.init_weights=\"w.pt\""}, {});
  // The working directory's, as a shell argument is, recorded absolute for the run's config.toml.
  CHECK(from_set.train.init_weights == std::filesystem::absolute("w.pt").string());
  CHECK(from_set.resolved.at_path("train.init_weights").value_or(std::string()) == from_set.train.init_weights);
  CHECK(tp::load_run_config_from_string(kRequiredComponents, "exp/a/run.toml", {}, {}).train.init_weights.empty());
}

TEST_CASE("dist.overlap reaches DistSection; on by default") {
  CHECK(load_text(kRequiredComponents).dist.overlap);
  CHECK_FALSE(load_text("[dist]\noverlap = false\n" + kRequiredComponents).dist.overlap);
  CHECK_FALSE(load_text(kRequiredComponents, {"dist.overlap=false"}).dist.overlap);
}

}  // namespace

// Security trial F13: host shards write printed `shards = "<path>"` raw; a '"' or '\' in the path
// gave a line that did not parse, or one that added keys.
TEST_CASE("toml_basic_string: any text, pasted after `key = `, parses back to itself") {
  for (const std::string& text : {std::string("plain/train-{000000..000003}.tar"), std::string("sh\"ar ds$(id)\\x"),
                                 std::string("x\"\n[model]\ncomponent = \"evil"), std::string("it's \x1b[31m\ttab"),
                                 std::string("")}) {
    const std::string quoted = tp::toml_basic_string(text);
    CAPTURE(quoted);
    CHECK(quoted.front() == '"');
    CHECK(quoted.find('\n') == std::string::npos);
    const toml::table parsed = toml::parse("shards = " + quoted + "\n");
    CHECK(parsed.size() == 1);
    CHECK(parsed["shards"].value<std::string>() == text);
  }
}
