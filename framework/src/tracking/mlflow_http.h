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
// A URI's user-info ("http://user:password@host") is basic authentication too, read here in memory
// only: Connection::tracking_uri never holds it, so no state file, log line or message can.
//
// Every transfer has a total deadline and every answer a size cap (docs/experiment_tracking.md,
// "Deadlines"): a server that drips its answer, or reads an upload a byte at a time, or answers
// with gigabytes, costs a bounded time and memory, never a hung or swollen host.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "tp/framework/config/run_config.h"

namespace tp::mlflow {

/// Reads one environment variable; nullptr when unset (std::getenv by default; tests pass a map).
using EnvLookup = std::function<const char*(const char*)>;

/// The most an answer may hold: MLflow's answers are a few KiB (a run with its params and latest
/// metrics, tens of KiB), so 8 MiB is generous; a larger one is abandoned at the cap.
inline constexpr std::size_t kMaxAnswerBytes = std::size_t{8} << 20;
/// An upload's total time limit is timeout_seconds plus one second per this many bytes: a
/// 300 MB checkpoint may take 20 minutes, a server that reads a byte a second cannot hold it for hours.
inline constexpr double kMinUploadBytesPerSecond = 256.0 * 1024;

/// Where the server is and how to talk to it.
struct Connection {
  std::string tracking_uri; ///< "http(s)://host[:port][/path]", without a trailing '/' or user-info
  std::string token;        ///< bearer token; "" = none
  std::string username, password; ///< basic authentication: the environment's, else the URI's user-info
  bool insecure_tls = false;
  std::string ca_bundle, client_cert;
  double timeout_seconds = 30;
};

/// The connection of `section` and the environment. The URI's user-info, if any, becomes the
/// basic authentication (percent-decoded) unless MLFLOW_TRACKING_USERNAME is set, and is taken out
/// of tracking_uri; a redacted one ("http://***@host", as config.toml holds it) carries none.
/// Throws ConfigError naming logging.mlflow.tracking_uri when no URI is given or its scheme is not
/// http or https (MLflow's file:, sqlite: and databricks: stores are not servers this client can
/// reach), and MLFLOW_TRACKING_PASSWORD when a username comes without it.
Connection connection_from(const MlflowSection& section, const EnvLookup& env);

/// `uri` without its user-info and trailing '/': the server it names, as Connection::tracking_uri
/// and the state file hold it ("http://***@h:5000/" -> "http://h:5000").
std::string server_of(std::string_view uri);

/// At most `limit` bytes of `bytes` for a message: printable ASCII as it is, line breaks and tabs
/// as spaces, any other byte as \xNN (no terminal escape or raw binary reaches a log), with
/// "... (N bytes)" when cut.
std::string printable_excerpt(std::string_view bytes, std::size_t limit = 200);

/// One answer: `status` 0 when no HTTP answer came (then `transport_error` says why).
struct Response {
  long status = 0;
  std::string body;
  std::string transport_error;
  /// The answer was abandoned at kMaxAnswerBytes: not worth trying again.
  bool too_large = false;
  /// 2xx.
  bool ok() const { return status >= 200 && status < 300; }
  /// Worth trying again later: no answer (refused, timed out, a deadline, DNS), 408, 429 or 5xx.
  bool transient() const {
    return (status == 0 && !too_large) || status == 408 || status == 429 || status >= 500;
  }
  /// "HTTP 403: <printable_excerpt of the body>" or the transport error, for messages.
  std::string describe() const;
};

/// One libcurl handle; requests are made one at a time (the sender's thread owns one client, the
/// start-up another). Each request has a total time limit (below) and its answer is cut off at
/// kMaxAnswerBytes. Thread safety: [one thread], except set_deadline() [any].
class HttpClient {
 public:
  using Clock = std::chrono::steady_clock;
  explicit HttpClient(Connection connection);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// GET <tracking_uri><path> (`path` starts with '/' and carries its query, escaped), within
  /// timeout_seconds in all.
  Response get(const std::string& path);
  /// POST <tracking_uri><path> with a JSON body, within timeout_seconds in all.
  Response post_json(const std::string& path, const std::string& json);
  /// PUT <tracking_uri><path> with the bytes of `file`, streamed (artifacts), within
  /// timeout_seconds + size / kMinUploadBytesPerSecond in all; a transfer that moves nothing for
  /// timeout_seconds is abandoned sooner.
  Response put_file(const std::string& path, const std::filesystem::path& file);
  const Connection& connection() const { return connection_; }

  /// No transfer of this client runs past `deadline`: the one in flight is abandoned when it
  /// passes (within about a second: libcurl's progress callback), and later ones fail at once
  /// with a transport error that says `reason` ("the end's wait, finish_timeout_seconds = 60 s, ran
  /// out"). A later deadline never extends an earlier one. [any]
  void set_deadline(Clock::time_point deadline, const std::string& reason);
  /// While `stop` is set and returns true, no transfer runs: the one in flight is abandoned within
  /// about a second (libcurl's progress callback), later ones fail at once; both say `reason`.
  /// For a wait the process must be able to leave (start-up under a stop signal); an empty
  /// `stop` ends it. [one thread, between requests]
  void abandon_when(std::function<bool()> stop, std::string reason);

 private:
  struct Handle;
  struct Request;
  /// The milliseconds left before the deadline (a large number when none is set).
  long long milliseconds_left() const;
  std::string deadline_reason() const;
  Response perform(const Request& request);

  Connection connection_;
  std::unique_ptr<Handle> handle_;
  std::atomic<Clock::rep> deadline_{Clock::time_point::max().time_since_epoch().count()};
  mutable std::mutex reason_mutex_;
  std::string deadline_reason_;
  std::function<bool()> abandon_;
  std::string abandon_reason_;
};

/// `text` escaped for a URL's query or path segment ('/' kept when `keep_slash`).
std::string url_escape(const std::string& text, bool keep_slash);

}  // namespace tp::mlflow
