// Reaching the rendezvous store is bounded by dist.timeout_s of wall clock (cluster trial F6):
// before, a non-zero rank whose MASTER_PORT had another program listening that never answers
// waited as long as that program listened (187 s for dist.timeout_s = 20), and a lone rank 1 with
// nothing listening took about twice the timeout (c10d's connection retries: 12.7 s for 5).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

/// A loopback TCP socket on a free port, listening (`listening`) or closed again (a port nothing
/// listens on). A listener never accepts nor answers: the kernel completes the connections into
/// its backlog, as for a program that holds the port and speaks another protocol.
class Port {
 public:
  explicit Port(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    socklen_t size = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    number_ = ntohs(address.sin_port);
    if (listening) REQUIRE(::listen(fd_, 16) == 0);
    else close();
  }
  ~Port() { close(); }
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
  int number() const { return number_; }

 private:
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  int number_ = 0;
};

/// Rank 1 of 2 alone, with the store at 127.0.0.1:`port` and dist.timeout_s = 5 (killed after 60 s
/// at most); the output ends with "exit C after M ms".
tp::test::HostRun lone_rank1(int port, const std::string& name) {
  const auto dir = tp::test::fresh_dir(name);
  return tp::test::run_shell("S=$(date +%s%N); RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                             std::to_string(port) + " timeout -s KILL 60 '" + tp::test::build_dir() +
                             "/bin/host' train --config tests/dist/ddp.toml --output-dir '" + dir.string() +
                             "' --set dist.timeout_s=5; echo \"exit $? after $(( ($(date +%s%N) - S) / 1000000 )) ms\"");
}

long long milliseconds_after(const std::string& output) {
  const auto at = output.find(" after ");
  return at == std::string::npos ? -1 : std::stoll(output.substr(at + 7));
}

}  // namespace

TEST_CASE("a listener on MASTER_PORT that never answers: a non-zero rank gives up after dist.timeout_s") {
  const Port listener(/*listening=*/true);
  const auto run = lone_rank1(listener.number(), "store_silent_listener");
  INFO(run.output);
  CHECK(tp::test::contains(run.output, "exit 1 after "));
  CHECK(milliseconds_after(run.output) < 8000);
  CHECK(tp::test::contains(run.output, "rank 1 could not reach the rendezvous store at 127.0.0.1:" +
                                           std::to_string(listener.number()) + " within dist.timeout_s = 5 s: no answer"));
  CHECK(!tp::test::contains(run.output, "frame #")); // c10d's backtrace stays out of the message
}

TEST_CASE("nothing listening on MASTER_PORT: a lone rank 1 gives up after dist.timeout_s, not twice that") {
  const Port closed(/*listening=*/false);
  const auto run = lone_rank1(closed.number(), "store_nothing_listening");
  INFO(run.output);
  CHECK(tp::test::contains(run.output, "exit 1 after "));
  CHECK(milliseconds_after(run.output) < 8000);
  CHECK(tp::test::contains(run.output, "could not reach the rendezvous store"));
}
