// The HTTP side of MLflow tracking: where the server is, how to authenticate, and one request at a
// time over libcurl (Debian's libcurl4-openssl-dev: the HTTP client every platform has, with TLS
// through the OpenSSL the host links already). Settings come from [logging.mlflow] and the
// environment variables MLflow's own client reads, so one set of credentials serves both:
//   MLFLOW_TRACKING_URI                 the server when logging.mlflow.tracking_uri is ""
//   MLFLOW_TRACKING_TOKEN               "Authorization: Bearer <token>"
//   MLFLOW_TRACKING_USERNAME, _PASSWORD HTTP basic authentication
//   MLFLOW_TRACKING_INSECURE_TLS        "true": do not verify the server's certificate
//   MLFLOW_TRACKING_SERVER_CERT_PATH    a CA bundle to verify it with
//   MLFLOW_TRACKING_CLIENT_CERT_PATH    a client certificate (PEM, key included)
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "tp/framework/config/run_config.h"

namespace tp::mlflow {

/// Reads one environment variable; nullptr when unset (std::getenv by default; tests pass a map).
using EnvLookup = std::function<const char*(const char*)>;

/// Where the server is and how to talk to it.
struct Connection {
  std::string tracking_uri; ///< "http(s)://host[:port][/path]", without a trailing '/'
  std::string token;        ///< bearer token; "" = none
  std::string username, password;
  bool insecure_tls = false;
  std::string ca_bundle, client_cert;
  double timeout_seconds = 30;
};

/// The connection of `section` and the environment. Throws ConfigError naming
/// logging.mlflow.tracking_uri when no URI is given or its scheme is not http or https (MLflow's
/// file:, sqlite: and databricks: stores are not servers this client can reach), and
/// MLFLOW_TRACKING_PASSWORD when a username comes without it.
Connection connection_from(const MlflowSection& section, const EnvLookup& env);

/// One answer: `status` 0 when no HTTP answer came (then `transport_error` says why).
struct Response {
  long status = 0;
  std::string body;
  std::string transport_error;
  /// 2xx.
  bool ok() const { return status >= 200 && status < 300; }
  /// Worth trying again later: no answer (refused, timed out, DNS), 408, 429 or 5xx.
  bool transient() const { return status == 0 || status == 408 || status == 429 || status >= 500; }
  /// "HTTP 403: <body's first 300 characters>" or the transport error, for messages.
  std::string describe() const;
};

/// One libcurl handle; requests are made one at a time (the sender's thread owns one client, the
/// start-up another). Thread safety: [one thread].
class HttpClient {
 public:
  explicit HttpClient(Connection connection);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// GET <tracking_uri><path> (`path` starts with '/' and carries its query, escaped).
  Response get(const std::string& path);
  /// POST <tracking_uri><path> with a JSON body.
  Response post_json(const std::string& path, const std::string& json);
  /// PUT <tracking_uri><path> with the bytes of `file`, streamed (artifacts; no total time limit,
  /// but a transfer that moves nothing for timeout_seconds is abandoned).
  Response put_file(const std::string& path, const std::filesystem::path& file);
  const Connection& connection() const { return connection_; }

 private:
  struct Handle;
  Connection connection_;
  std::unique_ptr<Handle> handle_;
};

/// `text` escaped for a URL's query or path segment ('/' kept when `keep_slash`).
std::string url_escape(const std::string& text, bool keep_slash);

}  // namespace tp::mlflow
