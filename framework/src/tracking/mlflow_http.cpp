#include "tracking/mlflow_http.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#if TP_MLFLOW
#include <curl/curl.h>
#endif

#include "tp/framework/config/secrets.h"
#include "tp/framework/error.h"

namespace tp::mlflow {
namespace {

const std::string kUriKey = "logging.mlflow.tracking_uri";

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string env_value(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value == nullptr ? std::string() : std::string(value);
}

bool env_true(const std::string& value) { return value == "true" || value == "True" || value == "TRUE" || value == "1"; }

// A URI split at its user-info: "http://u:p@h:5000/x" -> {"http://h:5000/x", "u:p"}.
struct UriParts {
  std::string server;
  std::string user_info;
};

// Read as redact_uri_credentials reads it (uri_user_info), so the user-info sent is exactly the part
// every writer hides.
UriParts split_user_info(std::string_view uri) {
  const std::optional<std::string_view> user_info = uri_user_info(uri);
  if (!user_info) return {std::string(uri), ""};
  const size_t start = static_cast<size_t>(user_info->data() - uri.data());
  return {std::string(uri.substr(0, start)) + std::string(uri.substr(start + user_info->size() + 1)),
          std::string(*user_info)};
}

int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

// "p%40ss" -> "p@ss", as a URL's user-info is written.
std::string percent_decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_digit(text[i + 1]) >= 0 && hex_digit(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string server_of(std::string_view uri) {
  std::string server = split_user_info(uri).server;
  while (!server.empty() && server.back() == '/') server.pop_back();
  return server;
}

std::string printable_excerpt(std::string_view bytes, std::size_t limit) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : bytes.substr(0, limit)) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte < 0x7f) {
      out += ch;
    } else if (ch == '\n' || ch == '\r' || ch == '\t') {
      out += ' ';
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  if (bytes.size() > limit) out += "... (" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

Connection connection_from(const MlflowSection& section, const EnvLookup& env) {
  Connection c;
  const std::string uri = section.tracking_uri.empty() ? env_value(env, "MLFLOW_TRACKING_URI") : section.tracking_uri;
  if (uri.empty())
    throw ConfigError(kUriKey, "logging.mlflow.enabled = true, but no server is named: set logging.mlflow.tracking_uri "
                               "(\"http://host:5000\") or the environment variable MLFLOW_TRACKING_URI. Nothing was "
                               "trained.");
  // The config loader refused such a logging.mlflow.tracking_uri already; MLFLOW_TRACKING_URI and
  // a config.toml read back by mlflow-sync are checked here.
  if (const std::string problem =
          unreadable_user_info(section.tracking_uri.empty() ? "MLFLOW_TRACKING_URI" : kUriKey, uri);
      !problem.empty())
    throw ConfigError(section.tracking_uri.empty() ? "MLFLOW_TRACKING_URI" : kUriKey, problem);
  if (!starts_with(uri, "http://") && !starts_with(uri, "https://"))
    throw ConfigError(kUriKey, "logging.mlflow.tracking_uri = \"" + redact_uri_credentials(uri) +
                                   "\": torchhost talks to an MLflow tracking server over http:// or https:// (its "
                                   "REST API); a file:, sqlite: or databricks: store is not one. Start `mlflow server` "
                                   "and give its address. Nothing was trained.");
  // The URI's user-info is read here and kept in memory only: tracking_uri, which the state file,
  // the log and every message show, never holds it.
  const UriParts parts = split_user_info(uri);
  c.tracking_uri = server_of(parts.server);
  c.token = env_value(env, "MLFLOW_TRACKING_TOKEN");
  c.username = env_value(env, "MLFLOW_TRACKING_USERNAME");
  c.password = env_value(env, "MLFLOW_TRACKING_PASSWORD");
  if (!c.username.empty() && c.password.empty())
    throw ConfigError("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_USERNAME is set but MLFLOW_TRACKING_PASSWORD is "
                                                  "not: set both for basic authentication (or neither). Nothing was "
                                                  "trained.");
  if (c.username.empty() && !parts.user_info.empty() && parts.user_info != kRedactedUserInfo) {
    const size_t colon = parts.user_info.find(':');
    c.username = percent_decode(parts.user_info.substr(0, colon));
    c.password = colon == std::string::npos ? "" : percent_decode(parts.user_info.substr(colon + 1));
  }
  c.insecure_tls = env_true(env_value(env, "MLFLOW_TRACKING_INSECURE_TLS"));
  c.ca_bundle = env_value(env, "MLFLOW_TRACKING_SERVER_CERT_PATH");
  c.client_cert = env_value(env, "MLFLOW_TRACKING_CLIENT_CERT_PATH");
  c.timeout_seconds = section.timeout_seconds;
  return c;
}

std::string Response::describe() const {
  if (status == 0) return transport_error;
  std::string text = "HTTP " + std::to_string(status);
  if (!body.empty()) text += ": " + printable_excerpt(body);
  return text;
}

struct HttpClient::Request {
  std::string method;
  std::string url;
  const std::string* json = nullptr;
  FILE* upload = nullptr;
  int64_t upload_size = 0;
};

void HttpClient::abandon_when(std::function<bool()> stop, std::string reason) {
  abandon_ = std::move(stop);
  abandon_reason_ = std::move(reason);
}

void HttpClient::set_deadline(Clock::time_point deadline, const std::string& reason) {
  {
    std::lock_guard lock(reason_mutex_);
    if (deadline.time_since_epoch().count() >= deadline_.load()) return;
    deadline_reason_ = reason;
  }
  deadline_.store(deadline.time_since_epoch().count());
}

long long HttpClient::milliseconds_left() const {
  const Clock::rep deadline = deadline_.load();
  if (deadline == Clock::time_point::max().time_since_epoch().count()) return std::numeric_limits<long long>::max();
  const auto left = Clock::time_point(Clock::duration(deadline)) - Clock::now();
  return std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
}

std::string HttpClient::deadline_reason() const {
  std::lock_guard lock(reason_mutex_);
  return deadline_reason_;
}

#if TP_MLFLOW
struct HttpClient::Handle {
  CURL* curl = nullptr;
  ~Handle() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

HttpClient::HttpClient(Connection connection) : connection_(std::move(connection)), handle_(std::make_unique<Handle>()) {
  // libcurl >= 7.84 initialises itself thread-safely on first use (Debian 12 has 7.88).
  handle_->curl = curl_easy_init();
  if (handle_->curl == nullptr) throw Error("mlflow: libcurl could not create a connection handle (out of memory)");
}

HttpClient::~HttpClient() = default;

namespace {

// What libcurl's callbacks of one transfer see.
struct Transfer {
  std::string* body;
  const std::atomic<HttpClient::Clock::rep>* deadline;
  const std::function<bool()>* abandon; ///< HttpClient::abandon_when's test; may be empty
  bool too_large = false;
  bool deadline_passed = false;
  bool abandoned = false;
};

size_t append_body(char* data, size_t size, size_t count, void* out) {
  auto* transfer = static_cast<Transfer*>(out);
  const size_t bytes = size * count;
  if (transfer->body->size() + bytes > kMaxAnswerBytes) {
    transfer->too_large = true; // returning less than given ends the transfer (CURLE_WRITE_ERROR)
    return 0;
  }
  transfer->body->append(data, bytes);
  return bytes;
}

// Called about once a second even while nothing moves: the deadline reaches a transfer in flight.
int check_deadline(void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* transfer = static_cast<Transfer*>(data);
  if (*transfer->abandon && (*transfer->abandon)()) {
    transfer->abandoned = true;
    return 1;
  }
  if (HttpClient::Clock::now().time_since_epoch().count() < transfer->deadline->load()) return 0;
  transfer->deadline_passed = true;
  return 1;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", seconds);
  return text;
}

}  // namespace

Response HttpClient::perform(const Request& request) {
  CURL* curl = handle_->curl;
  const Connection& c = connection_;
  Response response;
  const std::string where = " (" + request.method + " " + request.url + ")";
  // The transfer's own limit: one timeout for a JSON request, more for an upload's bytes.
  double limit_seconds = c.timeout_seconds;
  if (request.upload != nullptr) limit_seconds += static_cast<double>(request.upload_size) / kMinUploadBytesPerSecond;
  if (abandon_ && abandon_()) {
    response.transport_error = "not sent: " + abandon_reason_ + where;
    return response;
  }
  const long long left_ms = milliseconds_left();
  if (left_ms <= 0) {
    response.transport_error = "not sent: " + deadline_reason() + where;
    return response;
  }
  const double limit_ms = std::ceil(limit_seconds * 1000);
  const bool deadline_first = static_cast<double>(left_ms) < limit_ms;
  const long timeout_ms = static_cast<long>(std::min(limit_ms, static_cast<double>(left_ms)));
  const long connect_ms = std::min(timeout_ms, static_cast<long>(c.timeout_seconds * 1000));

  curl_easy_reset(curl);
  char error[CURL_ERROR_SIZE] = {0};
  Transfer transfer{&response.body, &deadline_, &abandon_};
  curl_slist* headers = nullptr;
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); // a background thread: no SIGALRM for DNS timeouts
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, check_deadline);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "torchhost");
  if (!c.token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + c.token).c_str());
  if (!c.username.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, c.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, c.password.c_str());
  }
  if (c.insecure_tls) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!c.ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, c.ca_bundle.c_str());
  if (!c.client_cert.empty()) curl_easy_setopt(curl, CURLOPT_SSLCERT, c.client_cert.c_str());
  if (request.json != nullptr) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.json->c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.json->size()));
  } else if (request.upload != nullptr) {
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READDATA, request.upload);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.upload_size));
    // A transfer that stalls for the timeout is abandoned before its total limit.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(c.timeout_seconds) + 1);
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    response.status = 0;
    response.body.clear();
    response.body.shrink_to_fit();
    if (transfer.too_large) {
      response.too_large = true;
      response.transport_error = "the server's answer was larger than " + std::to_string(kMaxAnswerBytes >> 20) +
                                 " MiB, the most torchhost takes from an MLflow server (whose answers are a few "
                                 "KiB), and was abandoned: is logging.mlflow.tracking_uri an MLflow tracking "
                                 "server?" + where;
    } else if (transfer.abandoned) {
      response.transport_error = "abandoned: " + abandon_reason_ + where;
    } else if (transfer.deadline_passed || (code == CURLE_OPERATION_TIMEDOUT && deadline_first)) {
      response.transport_error = "abandoned: " + deadline_reason() + where;
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
      response.transport_error = std::string(error[0] != '\0' ? error : curl_easy_strerror(code)) +
                                 ": the transfer's time limit is " + seconds_text(static_cast<double>(timeout_ms) / 1000.0) +
                                 " (logging.mlflow.timeout_seconds" +
                                 (request.upload != nullptr ? ", plus 1 s per 256 KiB uploaded" : "") + ")" + where;
    } else {
      response.transport_error = std::string(error[0] != '\0' ? error : curl_easy_strerror(code)) + where;
    }
    return response;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

Response HttpClient::get(const std::string& path) { return perform(Request{"GET", connection_.tracking_uri + path}); }

Response HttpClient::post_json(const std::string& path, const std::string& json) {
  return perform(Request{"POST", connection_.tracking_uri + path, &json});
}

Response HttpClient::put_file(const std::string& path, const std::filesystem::path& file) {
  std::error_code size_error;
  const auto size = std::filesystem::file_size(file, size_error);
  FILE* in = size_error ? nullptr : std::fopen(file.c_str(), "rb");
  if (in == nullptr) {
    Response missing;
    missing.transport_error = "cannot read " + file.string();
    return missing;
  }
  Response response =
      perform(Request{"PUT", connection_.tracking_uri + path, nullptr, in, static_cast<int64_t>(size)});
  std::fclose(in);
  return response;
}

#else
// Built without libcurl (TP_MLFLOW=OFF): tracking is refused where it would start.
struct HttpClient::Handle {};

HttpClient::HttpClient(Connection connection) : connection_(std::move(connection)) {
  throw ConfigError("logging.mlflow.enabled",
                    "this host was built without MLflow tracking (CMake option TP_MLFLOW=OFF, as the GPU kit builds "
                    "it): set logging.mlflow.enabled = false, or rebuild with libcurl4-openssl-dev installed and "
                    "-DTP_MLFLOW=ON. Nothing was trained.");
}

HttpClient::~HttpClient() = default;

namespace {

Response unavailable() {
  Response response;
  response.transport_error = "this host was built without MLflow tracking (TP_MLFLOW=OFF)";
  return response;
}

}  // namespace

Response HttpClient::get(const std::string&) { return unavailable(); }
Response HttpClient::post_json(const std::string&, const std::string&) { return unavailable(); }
Response HttpClient::put_file(const std::string&, const std::filesystem::path&) { return unavailable(); }
Response HttpClient::perform(const Request&) { return unavailable(); }
#endif

std::string url_escape(const std::string& text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char ch : text) {
    const bool unreserved = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                            ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/');
    if (unreserved) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

}  // namespace tp::mlflow
