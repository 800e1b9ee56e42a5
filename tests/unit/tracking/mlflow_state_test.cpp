// The tracking state file read back as untrusted input, the connection settings from the config
// and MLflow's environment variables, and [logging.mlflow]: the config's first table two levels
// deep, through --set, the environment mirrors and the unknown-key check.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tracking/mlflow_http.h"
#include "tracking/mlflow_state.h"
#include "tp/framework/config/load.h"
#include "tp/framework/error.h"

#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using namespace tp::mlflow;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(tp::test::build_dir()) / "tests" / "tracking_unit" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const char* kQuickstart = R"(
[model]
component = "org.torchhost.small_cnn"
[loss]
component = "org.torchhost.cross_entropy"
[data.train]
component = "org.torchhost.shapes"
)";

}  // namespace

TEST_CASE("the state file round-trips; none is an empty state; a damaged one is an error naming it") {
  const fs::path dir = fresh_dir("state");
  CHECK(read_state(dir) == State{});
  State s{"abc", "http://h:5000", "3", "r9", "mlflow-artifacts:/3/r9/artifacts", true, 41, "FINISHED", true, false};
  write_state(dir, s);
  CHECK(read_state(dir) == s);
  std::ofstream(state_file(dir)) << "records_sent = \"many\"\n";
  CHECK_THROWS_WITH_AS(read_state(dir), doctest::Contains("records_sent"), tp::Error);
  std::ofstream(state_file(dir)) << "records_sent = -4\n";
  CHECK_THROWS_AS(read_state(dir), tp::Error);
  std::ofstream(state_file(dir)) << "run_id = [\n";
  CHECK_THROWS_WITH_AS(read_state(dir), doctest::Contains("state.toml"), tp::Error);
}

// Fixer A's note on security trial F6: mlflow/ was made with create_directories, which follows a
// link planted in its place after the run's start checked it; the state went where it pointed.
TEST_CASE("the state file is never written through a link planted as mlflow/") {
  const fs::path dir = fresh_dir("state_link");
  const fs::path elsewhere = fresh_dir("state_link_target");
  fs::create_directory_symlink(elsewhere, dir / "mlflow");
  const State s{"abc", "http://h:5000", "3", "r9", "mlflow-artifacts:/3/r9/artifacts", true, 41, "FINISHED", true, false};
  CHECK_THROWS_WITH_AS(write_state(dir, s), doctest::Contains("is a symbolic link"), tp::ConfigError);
  CHECK(fs::is_empty(elsewhere));
}

TEST_CASE("connection_from: the config's URI over MLFLOW_TRACKING_URI, credentials from the environment") {
  std::map<std::string, std::string> env{{"MLFLOW_TRACKING_URI", "http://env:5000/"},
                                         {"MLFLOW_TRACKING_TOKEN", "secret"},
                                         {"MLFLOW_TRACKING_INSECURE_TLS", "true"}};
  const EnvLookup lookup = [&](const char* name) -> const char* {
    const auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  };
  tp::MlflowSection section{};
  section.timeout_seconds = 7;
  Connection c = connection_from(section, lookup);
  CHECK(c.tracking_uri == "http://env:5000");
  CHECK(c.token == "secret");
  CHECK(c.insecure_tls);
  CHECK(c.timeout_seconds == 7);
  section.tracking_uri = "https://config:443/prefix";
  CHECK(connection_from(section, lookup).tracking_uri == "https://config:443/prefix");
  section.tracking_uri = "file:///tmp/mlruns";
  CHECK_THROWS_WITH_AS(connection_from(section, lookup), doctest::Contains("http:// or https://"), tp::ConfigError);
  section.tracking_uri = "";
  env.erase("MLFLOW_TRACKING_URI");
  CHECK_THROWS_WITH_AS(connection_from(section, lookup), doctest::Contains("MLFLOW_TRACKING_URI"), tp::ConfigError);
  section.tracking_uri = "http://h";
  env["MLFLOW_TRACKING_USERNAME"] = "me";
  CHECK_THROWS_WITH_AS(connection_from(section, lookup), doctest::Contains("MLFLOW_TRACKING_PASSWORD"), tp::ConfigError);
  env["MLFLOW_TRACKING_PASSWORD"] = "pw";
  c = connection_from(section, lookup);
  CHECK(c.username == "me");
  CHECK(c.password == "pw");
  CHECK(url_escape("a b/c?d", false) == "a%20b%2Fc%3Fd");
  CHECK(url_escape("1/r9/artifacts/plots/loss.png", true) == "1/r9/artifacts/plots/loss.png");
}

TEST_CASE("[logging.mlflow]: defaults, the file, --set and the environment mirror; unknown keys refused") {
  const tp::RunConfig defaults = tp::load_run_config_from_string(kQuickstart, "run.toml", {}, {});
  CHECK_FALSE(defaults.logging.mlflow.enabled);
  CHECK(defaults.logging.mlflow.experiment == "torchhost");
  CHECK(defaults.logging.mlflow.log_checkpoints == "none");
  CHECK(defaults.resolved.at_path("logging.mlflow.flush_seconds").value<double>() == 5.0);

  const std::string file = std::string(kQuickstart) + "[logging.mlflow]\nenabled = true\ntags = [\"team=vision\"]\n";
  const tp::RunConfig set = tp::load_run_config_from_string(
      file, "run.toml", {"logging.mlflow.experiment=\"vision\"", "logging.mlflow.timeout_seconds=3"},
      {{"TP_LOGGING_MLFLOW_RUN_NAME", "nightly"}});
  CHECK(set.logging.mlflow.enabled);
  CHECK(set.logging.mlflow.tags == std::vector<std::string>{"team=vision"});
  CHECK(set.logging.mlflow.experiment == "vision");
  CHECK(set.logging.mlflow.timeout_seconds == 3.0);
  CHECK(set.logging.mlflow.run_name == "nightly");
  CHECK_FALSE(set.logging.tensorboard);

  CHECK_THROWS_WITH_AS(tp::load_run_config_from_string(std::string(kQuickstart) + "[logging.mlflow]\nexperimnet = \"x\"\n",
                                                       "run.toml", {}, {}),
                       doctest::Contains("did you mean 'logging.mlflow.experiment'"), tp::ConfigError);
  CHECK_THROWS_AS(tp::load_run_config_from_string(kQuickstart, "run.toml", {"logging.mlflow.timeout_seconds=0"}, {}),
                  tp::ConfigError);
  CHECK_THROWS_AS(tp::load_run_config_from_string(kQuickstart, "run.toml", {"logging.mlflow.log_checkpoints=\"all\""}, {}),
                  tp::ConfigError);
  CHECK_THROWS_AS(tp::load_run_config_from_string(std::string(kQuickstart) + "[logging]\nmlflow = 3\n", "run.toml", {}, {}),
                  tp::ConfigError);
  // --set into a table that the file made a value names both.
  CHECK_THROWS_WITH_AS(tp::load_run_config_from_string(std::string(kQuickstart) + "[logging]\nmlflow = 3\n", "run.toml",
                                                       {"logging.mlflow.enabled=true"}, {}),
                       doctest::Contains("cannot set a key inside 'logging.mlflow.enabled', which is an integer"),
                       tp::ConfigError);
}
