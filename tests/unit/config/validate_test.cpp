// validate_component and store_resolved: plugin tables checked against their declared schema.
#include <filesystem>

#include "tp/framework/config/load.h"
#include "tp/framework/config/validate.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::expect_config_error;
using tp::test::load_text;

const std::vector<tp::KeySpec> kSchema = {
    {"width", tp::ValueType::Int, "32", "channels of the first layer", {}},
    {"act", tp::ValueType::String, "\"relu\"", "activation", {"relu", "gelu"}},
    {"num_classes", tp::ValueType::Int, "", "number of classes", {}},
    {"scale", tp::ValueType::Float, "1.0", "", {}},
    {"sizes", tp::ValueType::IntArray, "[1, 2]", "", {}},
    {"gains", tp::ValueType::FloatArray, "[0.5]", "", {}},
};

/// A run whose [model] body is `model_body` (starting on line 3).
tp::RunConfig run_with_model(const std::string& model_body,
                             const std::vector<std::string>& sets = {}) {
  return load_text("[model]\ncomponent = \"org.torchhost.small_cnn\"\n" + model_body +
                       "[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n"
                       "[[metrics]]\ncomponent = \"acc\"\n[[metrics]]\ncomponent = \"f1\"\nk = 1\n",
                   sets);
}

TEST_CASE("validate_component fills defaults and canonical types") {
  tp::RunConfig cfg = run_with_model("num_classes = 10\nscale = 2\ngains = [1, 0.5]\n");
  tp::validate_component(cfg.model, kSchema, cfg.source);
  const toml::table& options = cfg.model.options;
  CHECK(options["num_classes"].value<int64_t>() == 10);
  CHECK(options["width"].value<int64_t>() == 32);
  CHECK(options["act"].value<std::string>() == "relu");
  CHECK(options["scale"].is_floating_point());
  CHECK(options["scale"].value<double>() == 2.0);
  CHECK(options["sizes"].as_array()->size() == 2);
  CHECK(options["gains"][0].is_floating_point());
  CHECK_FALSE(options.contains("component"));
}

TEST_CASE("validate_component: unknown key with did-you-mean, table and component named") {
  tp::RunConfig cfg = run_with_model("num_classes = 10\nwidht = 3\n");
  const tp::ConfigError e =
      expect_config_error([&] { tp::validate_component(cfg.model, kSchema, cfg.source); });
  CHECK(e.key_path() == "model.widht");
  TP_CHECK_CONTAINS(std::string(e.what()), "run.toml:4:9: [model] (org.torchhost.small_cnn): "
                                           "unknown key 'widht'; did you mean 'width'?");
  TP_CHECK_CONTAINS(std::string(e.what()), "accepts: width, act, num_classes");
}

TEST_CASE("validate_component: wrong type with position, or with the override") {
  tp::RunConfig cfg = run_with_model("num_classes = 10\n\nwidth = \"wide\"\n");
  const tp::ConfigError e =
      expect_config_error([&] { tp::validate_component(cfg.model, kSchema, cfg.source); });
  CHECK(e.key_path() == "model.width");
  TP_CHECK_CONTAINS(std::string(e.what()), "run.toml:5:9: [model] (org.torchhost.small_cnn): ");
  TP_CHECK_CONTAINS(std::string(e.what()), "expected an integer, got a string (\"wide\")");
  TP_CHECK_CONTAINS(std::string(e.what()), "width = 32");

  tp::RunConfig set = run_with_model("num_classes = 10\n", {"model.scale=big"});
  const tp::ConfigError from_set =
      expect_config_error([&] { tp::validate_component(set.model, kSchema, set.source); });
  CHECK(from_set.key_path() == "model.scale");
  TP_CHECK_CONTAINS(std::string(from_set.what()), "--set model.scale=big: [model]");

  tp::RunConfig array = run_with_model("num_classes = 10\nsizes = [1.5]\n");
  const tp::ConfigError bad_array =
      expect_config_error([&] { tp::validate_component(array.model, kSchema, array.source); });
  TP_CHECK_CONTAINS(std::string(bad_array.what()),
                    "expected an array of integers, got an array of floats");
}

TEST_CASE("validate_component: choices and missing required keys") {
  tp::RunConfig cfg = run_with_model("num_classes = 10\nact = \"tanh\"\n");
  const tp::ConfigError choice =
      expect_config_error([&] { tp::validate_component(cfg.model, kSchema, cfg.source); });
  CHECK(choice.key_path() == "model.act");
  TP_CHECK_CONTAINS(std::string(choice.what()), "expected relu or gelu");

  tp::RunConfig missing = run_with_model("");
  const tp::ConfigError required =
      expect_config_error([&] { tp::validate_component(missing.model, kSchema, "run.toml"); });
  CHECK(required.key_path() == "model.num_classes");
  TP_CHECK_CONTAINS(std::string(required.what()),
                    "run.toml: [model] (org.torchhost.small_cnn): missing required key "
                    "'num_classes' (an integer; number of classes)");

  const tp::ConfigError metric = expect_config_error(
      [&] { tp::validate_component(missing.metrics[1], {}, missing.source); });
  CHECK(metric.key_path() == "metrics[1].k");
  TP_CHECK_CONTAINS(std::string(metric.what()), "[metrics[1]] (f1): unknown key 'k'");
}

TEST_CASE("store_resolved writes validated options back into the resolved table") {
  tp::RunConfig cfg = run_with_model("num_classes = 10\n");
  tp::validate_component(cfg.model, kSchema, cfg.source);
  tp::store_resolved(cfg, cfg.model);
  CHECK(cfg.resolved.at_path("model.width").value<int64_t>() == 32);
  CHECK(cfg.resolved.at_path("model.component").value<std::string>() == "org.torchhost.small_cnn");

  const std::vector<tp::KeySpec> metric_schema = {{"k", tp::ValueType::Int, "5", "", {}}};
  tp::validate_component(cfg.metrics[0], metric_schema, cfg.source);
  tp::store_resolved(cfg, cfg.metrics[0]);
  CHECK(cfg.resolved.at_path("metrics[0].k").value<int64_t>() == 5);
  CHECK(cfg.resolved.at_path("metrics[0].component").value<std::string>() == "acc");
  CHECK(cfg.resolved.at_path("metrics[1].component").value<std::string>() == "f1");

  tp::validate_component(cfg.data.train, {{"size", tp::ValueType::Int, "100", "", {}}}, cfg.source);
  tp::store_resolved(cfg, cfg.data.train);
  CHECK(cfg.resolved.at_path("data.train.size").value<int64_t>() == 100);
  CHECK(cfg.resolved.at_path("data.num_workers").value<int64_t>() == 2);

  tp::ComponentConfig bogus{"x", "trainer", {}};
  CHECK_THROWS_AS(tp::store_resolved(cfg, bogus), tp::Error);
}

}  // namespace

TEST_CASE("validate_component: a TP_CFG_PATH value written in a file is relative to that file") {
  const std::vector<tp::KeySpec> schema = {{"root", tp::ValueType::String, "\"\"", "", {}, true},
                                           {"label", tp::ValueType::String, "\"\"", "", {}, false}};
  auto validated = [&](const std::string& body, const std::vector<std::string>& sets = {}) {
    tp::RunConfig cfg = tp::load_run_config_from_string(
        "[model]\ncomponent = \"m\"\n" + body + "[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n",
        "experiments/a/run.toml", sets, {});
    tp::validate_component(cfg.model, schema, cfg.source);
    return cfg.model.options;
  };
  const std::filesystem::path beside = std::filesystem::absolute("experiments/a");
  CHECK(validated("root = \"data/train\"\n")["root"].value<std::string>() == (beside / "data/train").string());
  CHECK(validated("root = \"../shared/x\"\n")["root"].value<std::string>() ==
        std::filesystem::absolute("experiments/shared/x").string());
  // Absolute values, the empty default and plain strings are left alone.
  CHECK(validated("root = \"/data/x\"\n")["root"].value<std::string>() == "/data/x");
  // A URI is no path: left whole, from a file or --set (resolving it would mangle it past redaction).
  CHECK(validated("root = \"s3://u:pw@bucket/x\"\n")["root"].value<std::string>() == "s3://u:pw@bucket/x");
  CHECK(validated("", {"model.root=\"https://h/x.tar\""})["root"].value<std::string>() == "https://h/x.tar");
  CHECK(validated("")["root"].value<std::string>() == "");
  CHECK(validated("label = \"data/train\"\n")["label"].value<std::string>() == "data/train");
  // A --set value is a shell argument: relative to the working directory, recorded absolute so
  // that the run's config.toml, read from its own directory later (host eval), names the same place.
  CHECK(validated("root = \"data/train\"\n", {"model.root=\"data/val\""})["root"].value<std::string>() ==
        std::filesystem::absolute("data/val").lexically_normal().string());
}
