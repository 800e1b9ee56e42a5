#include "tracking/mlflow_http.h"

#include <cstdio>
#include <string_view>
#include <utility>

#if TP_MLFLOW
#include <curl/curl.h>
#endif

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

}  // namespace

Connection connection_from(const MlflowSection& section, const EnvLookup& env) {
  Connection c;
  c.tracking_uri = section.tracking_uri.empty() ? env_value(env, "MLFLOW_TRACKING_URI") : section.tracking_uri;
  if (c.tracking_uri.empty())
    throw ConfigError(kUriKey, "logging.mlflow.enabled = true, but no server is named: set logging.mlflow.tracking_uri "
                               "(\"http://host:5000\") or the environment variable MLFLOW_TRACKING_URI. Nothing was "
                               "trained.");
  if (!starts_with(c.tracking_uri, "http://") && !starts_with(c.tracking_uri, "https://"))
    throw ConfigError(kUriKey, "logging.mlflow.tracking_uri = \"" + c.tracking_uri +
                                   "\": torchhost talks to an MLflow tracking server over http:// or https:// (its "
                                   "REST API); a file:, sqlite: or databricks: store is not one. Start `mlflow server` "
                                   "and give its address. Nothing was trained.");
  while (!c.tracking_uri.empty() && c.tracking_uri.back() == '/') c.tracking_uri.pop_back();
  c.token = env_value(env, "MLFLOW_TRACKING_TOKEN");
  c.username = env_value(env, "MLFLOW_TRACKING_USERNAME");
  c.password = env_value(env, "MLFLOW_TRACKING_PASSWORD");
  if (!c.username.empty() && c.password.empty())
    throw ConfigError("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_USERNAME is set but MLFLOW_TRACKING_PASSWORD is "
                                                  "not: set both for basic authentication (or neither). Nothing was "
                                                  "trained.");
  c.insecure_tls = env_true(env_value(env, "MLFLOW_TRACKING_INSECURE_TLS"));
  c.ca_bundle = env_value(env, "MLFLOW_TRACKING_SERVER_CERT_PATH");
  c.client_cert = env_value(env, "MLFLOW_TRACKING_CLIENT_CERT_PATH");
  c.timeout_seconds = section.timeout_seconds;
  return c;
}

std::string Response::describe() const {
  if (status == 0) return transport_error;
  std::string text = "HTTP " + std::to_string(status);
  if (!body.empty()) text += ": " + (body.size() > 300 ? body.substr(0, 300) + "..." : body);
  return text;
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

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

struct Request {
  std::string method;
  std::string url;
  const std::string* json = nullptr;
  FILE* upload = nullptr;
  curl_off_t upload_size = 0;
};

Response perform(CURL* curl, const Connection& c, const Request& request) {
  curl_easy_reset(curl);
  Response response;
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  const long timeout_ms = static_cast<long>(c.timeout_seconds * 1000);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); // a background thread: no SIGALRM for DNS timeouts
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
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
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  } else if (request.upload != nullptr) {
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READDATA, request.upload);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, request.upload_size);
    // A large artifact takes what it takes; one that stalls for the timeout is abandoned.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(c.timeout_seconds) + 1);
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    response.status = 0;
    response.body.clear();
    response.transport_error = std::string(error[0] != '\0' ? error : curl_easy_strerror(code)) + " (" + request.method +
                               " " + request.url + ")";
    return response;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace

Response HttpClient::get(const std::string& path) {
  return perform(handle_->curl, connection_, Request{"GET", connection_.tracking_uri + path});
}

Response HttpClient::post_json(const std::string& path, const std::string& json) {
  return perform(handle_->curl, connection_, Request{"POST", connection_.tracking_uri + path, &json});
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
  Response response = perform(handle_->curl, connection_,
                              Request{"PUT", connection_.tracking_uri + path, nullptr, in, static_cast<curl_off_t>(size)});
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
