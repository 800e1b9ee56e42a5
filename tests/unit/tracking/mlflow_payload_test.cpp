// What a run sends to MLflow, built without a server (tracking/mlflow_payload.h): keys MLflow
// accepts, the config's leaves as params, history records as metrics named as on TensorBoard, and
// runs/log-batch bodies within the API's limits (1000 metrics, 100 params, 100 tags, 1000 in all).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "tracking/mlflow_payload.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

using namespace tp::mlflow;

TEST_CASE("mlflow_key keeps what MLflow accepts and writes an index as a path part") {
  CHECK(mlflow_key("val/accuracy") == "val/accuracy");
  CHECK(mlflow_key("metrics[0].top_k") == "metrics.0.top_k");
  CHECK(mlflow_key("optim.param_groups[1].lr") == "optim.param_groups.1.lr");
  CHECK(mlflow_key("loss:ce weight-2") == "loss:ce weight-2");
  CHECK(mlflow_key("a+b=c") == "a_b_c");
}

TEST_CASE("params_from_config: every leaf, arrays of tables indexed, long values cut, long keys left out") {
  const toml::table config = toml::parse(R"(
[train]
batch_size = 64
max_time = "1h"
[optim]
lr = 3e-4
betas = [0.9, 0.999]
[[metrics]]
component = "org.torchhost.accuracy"
[[metrics]]
component = "org.torchhost.f1"
num_classes = 3
)");
  const Entries params = params_from_config(config);
  std::vector<KeyValue> expected{{"metrics.0.component", "org.torchhost.accuracy"},
                                 {"metrics.1.component", "org.torchhost.f1"},
                                 {"metrics.1.num_classes", "3"},
                                 {"optim.betas", "[0.9, 0.999]"},
                                 {"optim.lr", "3e-04"},
                                 {"train.batch_size", "64"},
                                 {"train.max_time", "1h"}};
  REQUIRE(params.entries.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(params.entries[i].key == expected[i].key);
    CHECK(params.entries[i].value == expected[i].value);
  }
  CHECK(params.cut.empty());
  CHECK(params.dropped.empty());

  toml::table big;
  big.insert("long", std::string(kMaxParamValue + 10, 'x'));
  big.insert(std::string(kMaxKey + 1, 'k'), 1);
  const Entries limited = params_from_config(big);
  REQUIRE(limited.entries.size() == 1);
  CHECK(limited.entries[0].value.size() == kMaxParamValue);
  CHECK(limited.cut == std::vector<std::string>{"long"});
  CHECK(limited.dropped.size() == 1);
}

TEST_CASE("tags_from_table prefixes every leaf; user_tags reads key=value and refuses the rest") {
  const toml::table runtime = toml::parse("[versions]\ntorch = \"2.13.0\"\n[git]\ndirty = false\n");
  const Entries tags = tags_from_table(runtime, "torchhost.");
  CHECK(tags.entries == std::vector<KeyValue>{{"torchhost.git.dirty", "false"}, {"torchhost.versions.torch", "2.13.0"}});
  CHECK(user_tags({"team=vision", "note=a=b", "empty="}) ==
        std::vector<KeyValue>{{"team", "vision"}, {"note", "a=b"}, {"empty", ""}});
  CHECK_THROWS_AS(user_tags({"no-equals"}), tp::ConfigError);
  CHECK_THROWS_AS(user_tags({"=value"}), tp::ConfigError);
}

// A run resumed 64 times would have sent each earlier process's fields and plugins as tags: hundreds.
TEST_CASE("runtime.toml's earlier processes are one count tag, the rest of the provenance as before") {
  const toml::table runtime = toml::parse(R"(device = "cpu"
[provenance]
started = "2026-11-29T10:00:00Z"
earlier_dropped = 3
[[provenance.plugins]]
library = "a.so"
sha256 = "bb"
[[provenance.earlier]]
started = "2026-11-29T09:00:00Z"
[[provenance.earlier.plugins]]
library = "a.so"
sha256 = "aa"
[[provenance.earlier]]
started = "2026-11-29T09:30:00Z"
)");
  CHECK(runtime_tags_from_table(runtime).entries ==
        std::vector<KeyValue>{{"torchhost.device", "cpu"},
                              {"torchhost.provenance.earlier_count", "2"},
                              {"torchhost.provenance.earlier_dropped", "3"},
                              {"torchhost.provenance.plugins.0.library", "a.so"},
                              {"torchhost.provenance.plugins.0.sha256", "bb"},
                              {"torchhost.provenance.started", "2026-11-29T10:00:00Z"}});
  // A first process's runtime.toml has no earlier list, and no count tag.
  CHECK(runtime_tags_from_table(toml::parse("[provenance]\nstarted = \"x\"\n")).entries ==
        std::vector<KeyValue>{{"torchhost.provenance.started", "x"}});
}

TEST_CASE("metrics_from_record: values at the record's step, named as on TensorBoard; no step, no metrics") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto step = metrics_from_record({"step", {{"step", 20}, {"train/loss", 0.5}, {"lr", nan}}}, 7);
  REQUIRE(step.size() == 2);
  CHECK(step[0].key == "train/loss");
  CHECK(step[0].step == 20);
  CHECK(step[0].timestamp_ms == 7);
  CHECK(step[1].key == "lr");
  CHECK(std::isnan(step[1].value));
  const auto epoch = metrics_from_record({"epoch", {{"epoch", 1}, {"step", 93}, {"val/accuracy", 1.0}}}, 7);
  REQUIRE(epoch.size() == 2);
  CHECK(epoch[0].key == "epoch/epoch");
  CHECK(epoch[1].key == "epoch/val/accuracy");
  CHECK(epoch[1].step == 93);
  CHECK(metrics_from_record({"epoch", {{"epoch", 1}, {"val/loss", 0.1}}}, 7).empty());
}

TEST_CASE("log_batch_bodies: everything given, in order, each request within the API's limits") {
  std::vector<Metric> metrics;
  for (int i = 0; i < 2500; ++i) metrics.push_back({"m" + std::to_string(i % 7), i == 3 ? INFINITY : i * 0.5, i, 1});
  std::vector<KeyValue> params, tags;
  for (int i = 0; i < 150; ++i) params.push_back({"p" + std::to_string(i), "v"});
  for (int i = 0; i < 120; ++i) tags.push_back({"t" + std::to_string(i), "v"});
  const auto bodies = log_batch_bodies("run1", metrics, params, tags);
  size_t m = 0, p = 0, t = 0;
  for (const auto& text : bodies) {
    const auto body = nlohmann::json::parse(text);
    CHECK(body["run_id"] == "run1");
    const size_t bm = body["metrics"].size(), bp = body["params"].size(), bt = body["tags"].size();
    CHECK(bm <= kMaxMetricsPerBatch);
    CHECK(bp <= kMaxParamsPerBatch);
    CHECK(bt <= kMaxTagsPerBatch);
    CHECK(bm + bp + bt <= kMaxEntriesPerBatch);
    for (const auto& metric : body["metrics"]) {
      CHECK(metric["step"] == static_cast<int64_t>(m));
      if (m == 3) CHECK(metric["value"] == "Infinity");
      else CHECK(metric["value"].get<double>() == m * 0.5);
      ++m;
    }
    for (const auto& param : body["params"]) CHECK(param["key"] == "p" + std::to_string(p++));
    for (const auto& tag : body["tags"]) CHECK(tag["key"] == "t" + std::to_string(t++));
  }
  CHECK(m == 2500);
  CHECK(p == 150);
  CHECK(t == 120);
  CHECK(bodies.size() == 3);
  CHECK(log_batch_bodies("run1", {}, {}, {}).empty());
}
