// The secrets rules (tp/framework/config/secrets.h; issue 58): every URI's user-info redacted by one
// function, which the config's writers (to_toml_text, flatten_config) apply, and the environment
// variables whose values provenance records.
#include <string>

#include <toml++/toml.h>

#include "tp/framework/config/flatten.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/write.h"

#include <doctest/doctest.h>

TEST_CASE("redact_uri_credentials: every URI's user-info becomes ***, nothing else changes") {
  using tp::redact_uri_credentials;
  CHECK(redact_uri_credentials("http://alice:s3cret@mlflow:5000/x") == "http://***@mlflow:5000/x");
  CHECK(redact_uri_credentials("https://token@h") == "https://***@h");
  CHECK(redact_uri_credentials("http://h:5000") == "http://h:5000");
  CHECK(redact_uri_credentials("http://h/path@x") == "http://h/path@x"); // an '@' in the path is no user-info
  CHECK(redact_uri_credentials("http://***@h") == "http://***@h");      // idempotent
  CHECK(redact_uri_credentials("a=\"http://u:p@h\" b=https://v:q@g/y --x") == "a=\"http://***@h\" b=https://***@g/y --x");
  CHECK(redact_uri_credentials("user@example.com, no URI") == "user@example.com, no URI");
  CHECK(redact_uri_credentials("http://u:p:w@x@h?q=a@b") == "http://***@h?q=a@b"); // the last '@' of the authority
  CHECK(redact_uri_credentials("://u:p@h") == "://***@h");
  CHECK(redact_uri_credentials("") == "");
}

TEST_CASE("the config's writers hold no URI credentials: to_toml_text, flatten_config") {
  const toml::table config = toml::parse(R"([logging.mlflow]
tracking_uri = "http://alice:s3cret@mlflow:5000"
tags = ["link=https://bob:pw@wiki/page"]
)");
  const std::string text = tp::to_toml_text(config);
  CHECK(text.find("s3cret") == std::string::npos);
  CHECK(text.find("pw@") == std::string::npos);
  CHECK(text.find("http://***@mlflow:5000") != std::string::npos);
  CHECK(config.at_path("logging.mlflow.tracking_uri").value<std::string>() == "http://alice:s3cret@mlflow:5000");
  const tp::FlatConfig flat = tp::flatten_config(config);
  CHECK(flat.at("logging.mlflow.tracking_uri").display == "http://***@mlflow:5000");
  CHECK(flat.at("logging.mlflow.tags").literal.find("pw@") == std::string::npos);
}

TEST_CASE("environment values: known settings with their values, any other name alone") {
  using tp::environment_value_recordable;
  CHECK(environment_value_recordable("TP_TRAIN_BATCH_SIZE"));
  CHECK(environment_value_recordable("TP_LOGGING_MLFLOW_TRACKING_URI")); // recorded redacted
  CHECK(environment_value_recordable("OMP_NUM_THREADS"));
  CHECK(environment_value_recordable("NCCL_DEBUG"));
  CHECK(environment_value_recordable("TORCH_NCCL_BLOCKING_WAIT"));
  CHECK(environment_value_recordable("MALLOC_ARENA_MAX"));
  CHECK(environment_value_recordable("TORCH_SHOW_CPP_STACKTRACES"));
  CHECK_FALSE(environment_value_recordable("TP_MY_TOKEN"));
  CHECK_FALSE(environment_value_recordable("TORCH_TOKEN"));
  CHECK_FALSE(environment_value_recordable("TORCH_HUB_API_KEY"));
  CHECK_FALSE(environment_value_recordable("NCCL_AUTH_TOKEN"));
  CHECK_FALSE(environment_value_recordable("GLOO_SECRET"));
}
