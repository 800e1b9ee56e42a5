// The secrets rules (tp/framework/config/secrets.h; issue 58): every URI's user-info redacted by one
// function, which the config's writers (to_toml_text, flatten_config) apply, and the environment
// variables whose values provenance records.
#include <optional>
#include <string>
#include <string_view>

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

// Security trial F4: a password holding an unencoded '#', '?' or '/' ended the user-info search at
// that character, so "http://alice:pa#ss1@h" was written whole to config.toml, checkpoints and
// train.log. The redactor now takes the last '@' where the RFC reading gives no host[:port].
TEST_CASE("redact_uri_credentials: a password with an unencoded '#', '?' or '/' is redacted whole") {
  using tp::redact_uri_credentials;
  CHECK(redact_uri_credentials("http://alice:pa#ss1@127.0.0.1:5000") == "http://***@127.0.0.1:5000");
  CHECK(redact_uri_credentials("http://alice:pa?ss2@h:1/x") == "http://***@h:1/x");
  CHECK(redact_uri_credentials("http://alice:pa/ss3@h") == "http://***@h");
  CHECK(redact_uri_credentials("tracking_uri = 'http://alice:pa#s/s?1@h:5000'\nnext = 1") ==
        "tracking_uri = 'http://***@h:5000'\nnext = 1");
  CHECK(redact_uri_credentials("GET http://alice:pa#ss1@h:5000/api/2.0/x failed") == "GET http://***@h:5000/api/2.0/x failed");
  // An '@' in the path of a URI whose authority is a host[:port] stays: no credentials to hide.
  CHECK(redact_uri_credentials("https://medium.com/@name and https://hf.co/x@main") ==
        "https://medium.com/@name and https://hf.co/x@main");
  CHECK(redact_uri_credentials("http://[::1]:5000/a@b") == "http://[::1]:5000/a@b");
}

TEST_CASE("uri_user_info: the credential splitter reads what the redactor hides") {
  for (const std::string uri : {"http://alice:s3cret@mlflow:5000/x", "https://token@h", "http://alice:pa#ss1@h:5000",
                                "http://alice:pa/ss3@h", "http://u:p:w@x@h?q=a@b"}) {
    const std::optional<std::string_view> user_info = tp::uri_user_info(uri);
    REQUIRE(user_info.has_value());
    const size_t start = static_cast<size_t>(user_info->data() - uri.data());
    CHECK(tp::redact_uri_credentials(uri) == uri.substr(0, start) + "***" + uri.substr(start + user_info->size()));
  }
  CHECK_FALSE(tp::uri_user_info("http://h:5000/x@y").has_value());
  CHECK_FALSE(tp::uri_user_info("alice:pw@h:5000").has_value());
}

TEST_CASE("unreadable_user_info: a user-info that reads more than one way is refused, shown redacted") {
  using tp::unreadable_user_info;
  const std::string key = "logging.mlflow.tracking_uri";
  CHECK(unreadable_user_info(key, "http://alice:s3cret@h:5000/x").empty());
  CHECK(unreadable_user_info(key, "http://alice:pa%23ss@h:5000").empty());
  CHECK(unreadable_user_info(key, "http://h:5000/mlflow").empty());
  CHECK(unreadable_user_info(key, "").empty());
  struct Case {
    std::string uri, secret, shown;
  };
  for (const Case& c : {Case{"http://alice:pa#ss1@127.0.0.1:5000", "pa#ss1", "http://***@127.0.0.1:5000"},
                        Case{"http://alice:pa?ss2@h:5000", "pa?ss2", "http://***@h:5000"},
                        Case{"http://alice:1234/ss@h:5000", "1234/ss", "http://***@h:5000"},  // "alice:1234" is a host:port too
                        Case{"http://alice@corp:pw@h", "pw", "http://***@h"},
                        Case{"http://h:5000/x@y", "x@y", "http://***@y"},
                        Case{"alice:passw4@127.0.0.1:5000", "passw4", "***@127.0.0.1:5000"},
                        Case{"http://alice:pa ss@h", "pa ss", "http://***@h"}}) {
    const std::string message = unreadable_user_info(key, c.uri);
    CAPTURE(c.uri);
    CHECK(message.find(c.secret) == std::string::npos);
    CHECK(message.find(key + " = \"" + c.shown + "\"") != std::string::npos);
    CHECK(message.find("'#' as %23, '?' as %3F, '/' as %2F, '@' as %40") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}
