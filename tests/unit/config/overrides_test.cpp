// --set and environment overrides: value parsing, component targets, and their errors.
#include "tp/framework/config/load.h"
#include "tp/framework/config/overrides.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::expect_config_error;
using tp::test::kRequiredComponents;
using tp::test::load_text;

TEST_CASE("parse_override splits at the first '='") {
  const tp::Override o = tp::parse_override(" run.name = a=b ");
  CHECK(o.key_path == "run.name");
  CHECK(o.value_text == "a=b");
  CHECK(expect_config_error([] { tp::parse_override("optim.lr"); }).key_path() == "optim.lr");
  CHECK(expect_config_error([] { tp::parse_override("=3"); }).key_path().empty());
}

TEST_CASE("--set values follow TOML rules with a string fallback") {
  const tp::RunConfig cfg = load_text(kRequiredComponents,
                                      {"optim.lr=3e-4", "run.device=cpu", "run.name=\"my run\"",
                                       "optim.betas=[0.9,0.95]", "train.drop_last=false",
                                       "progress.every_seconds=5", "plugins.dirs=[\"/opt/p\"]"});
  CHECK(cfg.optim.lr == doctest::Approx(3e-4));
  CHECK(cfg.run.device == "cpu");
  CHECK(cfg.run.name == "my run");
  CHECK(cfg.optim.betas == std::vector<double>{0.9, 0.95});
  CHECK_FALSE(cfg.train.drop_last);
  CHECK(cfg.progress.every_seconds == 5.0);
  CHECK(cfg.resolved.at_path("progress.every_seconds").is_floating_point());
  CHECK(cfg.plugin_dirs == std::vector<std::string>{"/opt/p"});
}

TEST_CASE("--set reaches component tables, creating and appending them") {
  const tp::RunConfig cfg = load_text(
      "[[metrics]]\ncomponent = \"acc\"\n" + kRequiredComponents,
      {"model.width=64", "data.train.size=100", "data.train.root=/data/x", "metrics[0].top_k=5",
       "metrics[1].component=org.x.f1", "loss.component=other", "callbacks[0].component=cb",
       "data.val.component=v"});
  CHECK(cfg.model.options["width"].value<int64_t>() == 64);
  CHECK(cfg.data.train.options["size"].value<int64_t>() == 100);
  CHECK(cfg.data.train.options["root"].value<std::string>() == "/data/x");
  REQUIRE(cfg.metrics.size() == 2);
  CHECK(cfg.metrics[0].options["top_k"].value<int64_t>() == 5);
  CHECK(cfg.metrics[1].component == "org.x.f1");
  CHECK(cfg.loss.component == "other");
  REQUIRE(cfg.callbacks.size() == 1);
  CHECK(cfg.callbacks[0].component == "cb");
  REQUIRE(cfg.data.val.has_value());
  CHECK(cfg.data.val->component == "v");
  CHECK(cfg.resolved.at_path("model.width").value<int64_t>() == 64);
}

TEST_CASE("--set type mismatch names the override") {
  const tp::ConfigError e =
      expect_config_error([] { load_text(kRequiredComponents, {"train.batch_size=big"}); });
  CHECK(e.key_path() == "train.batch_size");
  TP_CHECK_CONTAINS(std::string(e.what()), "--set train.batch_size=big: train.batch_size: ");
  TP_CHECK_CONTAINS(std::string(e.what()), "expected an integer, got a string (\"big\")");

  const tp::ConfigError quoted =
      expect_config_error([] { load_text(kRequiredComponents, {"train.epochs=\"3\""}); });
  TP_CHECK_CONTAINS(std::string(quoted.what()), "expected an integer, got a string (\"3\")");

  const tp::ConfigError choice =
      expect_config_error([] { load_text(kRequiredComponents, {"optim.name=adagrad"}); });
  CHECK(choice.key_path() == "optim.name");
  TP_CHECK_CONTAINS(std::string(choice.what()), "--set optim.name=adagrad: ");
}

TEST_CASE("--set errors: unknown key, bad index, nested component key") {
  const tp::ConfigError unknown =
      expect_config_error([] { load_text(kRequiredComponents, {"train.batch_sz=3"}); });
  CHECK(unknown.key_path() == "train.batch_sz");
  TP_CHECK_CONTAINS(std::string(unknown.what()), "did you mean 'train.batch_size'?");

  const tp::ConfigError section =
      expect_config_error([] { load_text(kRequiredComponents, {"optimizer.lr=3"}); });
  TP_CHECK_CONTAINS(std::string(section.what()), "did you mean 'optim.lr'?");

  const tp::ConfigError past_end =
      expect_config_error([] { load_text(kRequiredComponents, {"metrics[2].k=1"}); });
  CHECK(past_end.key_path() == "metrics[2].k");
  TP_CHECK_CONTAINS(std::string(past_end.what()), "past the end");

  const tp::ConfigError no_index =
      expect_config_error([] { load_text(kRequiredComponents, {"metrics.k=1"}); });
  TP_CHECK_CONTAINS(std::string(no_index.what()), "array of tables");

  const tp::ConfigError nested =
      expect_config_error([] { load_text(kRequiredComponents, {"model.a.b=1"}); });
  TP_CHECK_CONTAINS(std::string(nested.what()), "component keys are flat");

  const tp::ConfigError bare =
      expect_config_error([] { load_text(kRequiredComponents, {"model=3"}); });
  CHECK(bare.key_path() == "model");
}

TEST_CASE("environment mirrors: names, parsing and errors") {
  const tp::RunConfig cfg = load_text(
      kRequiredComponents, {},
      {{"TP_DATA_NUM_WORKERS", "0"}, {"TP_OPTIM_NESTEROV", "true"}, {"TP_RUN_NAME", "\"quoted\""},
       {"TP_CHECKPOINT_MONITOR", "val/accuracy"}, {"TP_MODEL_WIDTH", "3"}});
  CHECK(cfg.data.num_workers == 0);
  CHECK(cfg.optim.nesterov);
  CHECK(cfg.run.name == "quoted");
  CHECK(cfg.checkpoint.monitor == "val/accuracy");
  CHECK(cfg.model.options.empty()); // component keys have no environment mirrors

  const tp::ConfigError e = expect_config_error(
      [] { load_text(kRequiredComponents, {}, {{"TP_TRAIN_EPOCHS", "many"}}); });
  CHECK(e.key_path() == "train.epochs");
  TP_CHECK_CONTAINS(std::string(e.what()), "environment variable TP_TRAIN_EPOCHS=many");
  TP_CHECK_CONTAINS(std::string(e.what()), "expected an integer");
}

TEST_CASE("an unknown TP_* variable is named with the closest mirror, never with its value") {
  // Issue 58 (a low): a mistyped mirror was ignored without a word.
  const std::vector<std::string> warnings = tp::unknown_environment_variables(
      {{"TP_TRAIN_BATCHSIZE", "64"}, {"TP_MY_TOKEN", "s3cr3t-value"}, {"TP_TRAIN_EPOCHS", "3"}, {"TP_UNITY", "OFF"},
       {"TP_KILL9_SEED", "7"}, {"TP_MODEL_WIDTH", "3"}, {"PATH", "/usr/bin"}, {"TORCH_HOME", "/tmp"}});
  REQUIRE(warnings.size() == 3); // a mirror, the tools' own variables and other names pass
  TP_CHECK_CONTAINS(warnings[0], "environment variable TP_MODEL_WIDTH is ignored");
  TP_CHECK_CONTAINS(warnings[0], "component keys have none");
  TP_CHECK_CONTAINS(warnings[1], "environment variable TP_MY_TOKEN is ignored");
  TP_CHECK_CONTAINS(warnings[2], "environment variable TP_TRAIN_BATCHSIZE is ignored");
  TP_CHECK_CONTAINS(warnings[2], "did you mean TP_TRAIN_BATCH_SIZE?");
  for (const std::string& warning : warnings) {
    CHECK(warning.find("s3cr3t") == std::string::npos);
    CHECK(warning.find("=64") == std::string::npos);
  }
  for (const std::string& tool : tp::tool_environment_variables()) CHECK(tool.starts_with("TP_"));
}

}  // namespace
