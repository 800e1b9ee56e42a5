// The MLflow client against hostile servers (tests/unit/tracking/fake_http_server.h; issue 58): an
// answer larger than the cap is abandoned at it, a dripped answer or upload ends at its total
// limit, a deadline reaches the transfer in flight, a 200 that is not MLflow's JSON is said to be
// that (a printable excerpt, no raw bytes), a URI's user-info is basic authentication held in
// memory only, never in the state file.
// A state file naming another server than the configured one: the sweep's parent and `host eval
// --mlflow` send it nothing (host mlflow-sync: tests/integration/mlflow). About three seconds, most
// of it the limits the drips run into.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>

#include "tp/framework/config/load.h"
#include "tp/framework/error.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/log.h"
#include "tracking/mlflow_api.h"
#include "tracking/mlflow_http.h"
#include "tracking/mlflow_state.h"

#include "fake_http_server.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using namespace tp::mlflow;
using tp::test::FakeHttpServer;
using tp::test::FakeRequest;
using tp::test::Reply;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Connection connection_to(const std::string& uri, double timeout_seconds) {
  tp::MlflowSection section{};
  section.tracking_uri = uri;
  section.timeout_seconds = timeout_seconds;
  return connection_from(section, [](const char*) -> const char* { return nullptr; });
}

// Headers, then `byte` every `interval` seconds until the client goes (or 10 s: a client without a
// total limit would wait that long, which the tests' bounds catch).
void drip(Reply& reply, double interval) {
  if (!reply.send("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until && reply.send("{") && reply.pause(interval)) {
  }
}

fs::path small_file(const std::string& name) {
  const fs::path dir = fs::path(tp::test::build_dir()) / "tests" / "tracking_unit" / "http";
  fs::create_directories(dir);
  std::ofstream(dir / name) << "a = 1\n";
  return dir / name;
}

}  // namespace

TEST_CASE("the state file holds the server, never the URI's credentials") {
  const fs::path dir = fs::path(tp::test::build_dir()) / "tests" / "tracking_unit" / "state_secret";
  fs::remove_all(dir);
  State state;
  state.tracking_uri = "http://alice:s3cret@mlflow:5000";
  write_state(dir, state);
  std::ifstream in(state_file(dir));
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(written.find("s3cret") == std::string::npos);
}

TEST_CASE("connection_from: the URI's user-info is basic authentication, kept out of tracking_uri") {
  std::map<std::string, std::string> env;
  const EnvLookup lookup = [&](const char* name) -> const char* {
    const auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  };
  tp::MlflowSection section{};
  section.tracking_uri = "http://alice:p%40ss@mlflow:5000/";
  Connection c = connection_from(section, lookup);
  CHECK(c.tracking_uri == "http://mlflow:5000");
  CHECK(c.username == "alice");
  CHECK(c.password == "p@ss");
  // The environment's credentials win (as MLflow's client takes them).
  env["MLFLOW_TRACKING_USERNAME"] = "bob";
  env["MLFLOW_TRACKING_PASSWORD"] = "pw";
  c = connection_from(section, lookup);
  CHECK(c.username == "bob");
  CHECK(c.password == "pw");
  env.clear();
  // config.toml's redacted form carries none.
  section.tracking_uri = "http://***@mlflow:5000";
  c = connection_from(section, lookup);
  CHECK(c.tracking_uri == "http://mlflow:5000");
  CHECK(c.username.empty());
  section.tracking_uri = "ftp://alice:s3cret@mlflow";
  try {
    (void)connection_from(section, lookup);
    FAIL("an ftp URI was taken");
  } catch (const tp::ConfigError& e) {
    CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
    CHECK(std::string(e.what()).find("ftp://***@mlflow") != std::string::npos);
  }
  CHECK(server_of("https://u:p@h:1/x/") == "https://h:1/x");
  CHECK(printable_excerpt("ok\x1b[31m\n\xff", 200) == "ok\\x1b[31m \\xff");
  CHECK(printable_excerpt(std::string(300, 'a'), 10) == "aaaaaaaaaa... (300 bytes)");
}

TEST_CASE("the URI's credentials reach the server as basic authentication, and only as that") {
  FakeHttpServer server([](const FakeRequest&, Reply& reply) { reply.answer(200, "{}"); });
  const std::string uri = server.uri();
  HttpClient http(connection_to("http://alice:s3cret@" + uri.substr(7), 5));
  CHECK(http.get("/api/2.0/mlflow/x").ok());
  const auto requests = server.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].headers.find("Authorization: Basic YWxpY2U6czNjcmV0") != std::string::npos); // alice:s3cret
  CHECK(http.connection().tracking_uri == uri);
}

TEST_CASE("an answer larger than the cap is abandoned at it: not kept, not tried again") {
  FakeHttpServer server([](const FakeRequest&, Reply& reply) {
    if (!reply.send("HTTP/1.1 200 OK\r\nContent-Length: 2147483648\r\n\r\n")) return;
    const std::string chunk(1 << 20, '{');
    for (int i = 0; i < 2048 && reply.send(chunk); ++i) {
    }
  });
  HttpClient http(connection_to(server.uri(), 20));
  const auto start = std::chrono::steady_clock::now();
  const Response response = http.get("/api/2.0/mlflow/experiments/get-by-name?experiment_name=x");
  CHECK(seconds_since(start) < 10);
  CHECK(response.too_large);
  CHECK_FALSE(response.transient());
  CHECK(response.body.empty());
  CHECK(response.describe().find("larger than 8 MiB") != std::string::npos);
  CHECK(response.describe().find(server.uri()) != std::string::npos);
  Api api(http);
  try {
    api.experiment_id("x");
    FAIL("a 2 GB answer was taken");
  } catch (const ApiError& e) {
    CHECK(e.unexpected());
    CHECK_FALSE(e.transient());
  }
}

TEST_CASE("a dripped answer ends at the transfer's total limit, an upload's too") {
  FakeHttpServer server([](const FakeRequest&, Reply& reply) { drip(reply, 0.1); });
  HttpClient http(connection_to(server.uri(), 1));
  auto start = std::chrono::steady_clock::now();
  Response response = http.post_json("/api/2.0/mlflow/runs/log-batch", "{}");
  CHECK(seconds_since(start) < 3);
  CHECK(response.status == 0);
  CHECK(response.transient());
  CHECK(response.transport_error.find("time limit") != std::string::npos);
  // An upload answered by a drip (or read a byte at a time) has a total limit too: timeout_seconds
  // plus a second per 256 KiB (the file is a few bytes). Without one it ran for the drip's 10 s.
  start = std::chrono::steady_clock::now();
  response = http.put_file("/api/2.0/mlflow-artifacts/artifacts/1/r/artifacts/config.toml", small_file("up.toml"));
  CHECK(seconds_since(start) < 3);
  CHECK(response.status == 0);
  CHECK(response.transient());
}

TEST_CASE("a deadline reaches the transfer in flight, and later ones fail at once") {
  FakeHttpServer server([](const FakeRequest&, Reply& reply) { drip(reply, 0.1); });
  HttpClient http(connection_to(server.uri(), 30));
  std::thread end([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    http.set_deadline(HttpClient::Clock::now() + std::chrono::milliseconds(200), "the end's wait ran out");
  });
  auto start = std::chrono::steady_clock::now();
  Response response = http.put_file("/api/2.0/mlflow-artifacts/artifacts/1/r/artifacts/a.toml", small_file("a.toml"));
  end.join();
  CHECK(seconds_since(start) < 2.5);
  CHECK(response.transient());
  CHECK(response.transport_error.find("the end's wait ran out") != std::string::npos);
  start = std::chrono::steady_clock::now();
  response = http.get("/api/2.0/mlflow/runs/get?run_id=r");
  CHECK(seconds_since(start) < 0.5);
  CHECK(response.transport_error.find("not sent: the end's wait ran out") != std::string::npos);
  CHECK(server.requests().size() == 1);
}

TEST_CASE("a 200 that is not MLflow's JSON is 'not an MLflow tracking server', with a printable excerpt") {
  FakeHttpServer server([](const FakeRequest&, Reply& reply) {
    reply.answer(200, "<html>\x1b[2J\x1b]0;owned\x07 please log in\n</html>");
  });
  HttpClient http(connection_to(server.uri(), 5));
  Api api(http);
  try {
    api.experiment_id("x");
    FAIL("an HTML page was taken for MLflow's answer");
  } catch (const ApiError& e) {
    const std::string message = e.what();
    CHECK(e.unexpected());
    CHECK_FALSE(e.transient());
    CHECK(message.find("not an MLflow tracking server") != std::string::npos);
    CHECK(message.find(server.uri()) != std::string::npos);
    CHECK(message.find('\x1b') == std::string::npos);
    CHECK(message.find('\x07') == std::string::npos);
    CHECK(message.find("\\x1b[2J") != std::string::npos);
    CHECK(message.find("MLFLOW_TRACKING_TOKEN") == std::string::npos);
  }
}

TEST_CASE("a state file naming another server: the sweep's parent and eval --mlflow send it nothing") {
  const auto mlflow_answer = [](const FakeRequest& request, Reply& reply) {
    if (request.path.find("get-by-name") != std::string::npos)
      reply.answer(200, R"({"experiment": {"experiment_id": "1", "lifecycle_stage": "active"}})");
    else if (request.path.find("runs/create") != std::string::npos)
      reply.answer(200, R"({"run": {"info": {"run_id": "p1", "experiment_id": "1", "status": "RUNNING"}}})");
    else
      reply.answer(200, "{}");
  };
  FakeHttpServer configured(mlflow_answer);
  FakeHttpServer other(mlflow_answer);
  const tp::RunConfig config = tp::load_run_config_from_string(
      "[model]\ncomponent = \"m\"\n[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n"
      "[logging.mlflow]\nenabled = true\ntracking_uri = \"" + configured.uri() + "\"\ntimeout_seconds = 2\n",
      "run.toml", {}, {});
  const fs::path dir = fs::path(tp::test::build_dir()) / "tests" / "tracking_unit" / "other_server";
  fs::remove_all(dir);
  State state;
  state.torchhost_run_id = "sweep";
  state.tracking_uri = other.uri();
  state.experiment_id = "1";
  state.run_id = "p0";
  write_state(dir, state);
  tp::Logger log;

  // The end of the sweep: the parent keeps its status (a warning); neither server hears of it.
  tp::end_mlflow_parent_run(config, dir, tp::MlflowEnd::kFinished, log);
  CHECK(other.requests().empty());
  CHECK(configured.requests().empty());
  // host eval --mlflow: refused, naming the file and both servers.
  try {
    tp::log_eval_to_mlflow(config.logging.mlflow, dir, "eval/best", {{"val/accuracy", 0.5}}, 3, log);
    FAIL("the metrics went to the state file's server");
  } catch (const tp::ConfigError& e) {
    const std::string message = e.what();
    CHECK(message.find("state.toml") != std::string::npos);
    CHECK(message.find(other.uri()) != std::string::npos);
    CHECK(message.find(configured.uri()) != std::string::npos);
  }
  CHECK(other.requests().empty());
  // The sweep's start: a new parent run on the configured server, the other never reached.
  CHECK(tp::start_mlflow_parent_run(config, dir, "sweep", log) == "p1");
  CHECK(other.requests().empty());
  CHECK(read_state(dir).tracking_uri == configured.uri());
}

// Security trial F9: a 200 answer's run id, experiment id and artifact URI reached the console and
// train.log raw ("tracking this run as .../runs/r1<ESC>[2J..."). Ids that are no ids are an answer
// that is not MLflow's; the artifact URI, which may be any text, is shown printable.
TEST_CASE("a server's run id, experiment id and artifact URI never reach a message raw") {
  FakeHttpServer server([](const FakeRequest& request, Reply& reply) {
    if (request.path.find("get-by-name") != std::string::npos)
      reply.answer(200, "{\"experiment\": {\"experiment_id\": \"1\\u001b[35mEXP\", \"lifecycle_stage\": \"active\"}}");
    else if (request.path.find("runs/create") != std::string::npos)
      reply.answer(200, "{\"run\": {\"info\": {\"run_id\": \"r1\\u001b[2J\\nFORGED\", \"experiment_id\": \"1\"}}}");
    else
      reply.answer(200, "{\"run\": {\"info\": {\"run_id\": \"0123abcd\", \"experiment_id\": \"1\\nX\"}}}");
  });
  HttpClient http(connection_to(server.uri(), 5));
  Api api(http);
  const auto refusal = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const ApiError& e) {
      return e.what();
    }
    return "";
  };
  for (const std::string& message : {refusal([&] { (void)api.experiment_id("x"); }),
                                     refusal([&] { (void)api.create_run("1", "r", 0, {}); }),
                                     refusal([&] { (void)api.get_run("0123abcd"); })}) {
    CAPTURE(message);
    CHECK(message.find("that is no id") != std::string::npos);
    CHECK(message.find("not an MLflow tracking server") != std::string::npos);
    CHECK(message.find('\x1b') == std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
  const std::string artifact = refusal([&] {
    api.upload_artifact("s3://b/\x1b[41mART\nFORGED-ART", "config.toml", small_file("artifact.toml"));
  });
  CHECK(artifact.find("s3://b/\\x1b[41mART FORGED-ART") != std::string::npos);
  CHECK(artifact.find('\x1b') == std::string::npos);
}
