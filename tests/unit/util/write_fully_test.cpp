// write_fully (util/write_fully.h), the one write loop of train.log, history.jsonl, the
// TensorBoard event files and every atomically replaced file: all bytes or the errno that stopped it.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "tp/framework/util/write_fully.h"

TEST_CASE("write_fully writes a buffer larger than a pipe takes at once, every byte in order") {
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  // 1 MiB through a 64 KiB pipe: write() returns short counts while a reader drains the other end.
  std::string sent(1 << 20, '\0');
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7 % 251);
  std::string received;
  const pid_t reader = ::fork();
  REQUIRE(reader >= 0);
  if (reader == 0) {
    ::close(ends[1]);
    char buffer[4096];
    std::string got;
    for (ssize_t n; (n = ::read(ends[0], buffer, sizeof buffer)) > 0;) got.append(buffer, static_cast<std::size_t>(n));
    ::_exit(got == sent ? 0 : 1);
  }
  ::close(ends[0]);
  CHECK(tp::write_fully(ends[1], sent.data(), sent.size()) == 0);
  ::close(ends[1]);
  int status = 0;
  REQUIRE(::waitpid(reader, &status, 0) == reader);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0); // the reader got the same bytes
}

TEST_CASE("write_fully returns the errno of the write that failed: a full device, a closed descriptor") {
  const int full = ::open("/dev/full", O_WRONLY);
  REQUIRE(full >= 0);
  const std::string line = "a history record\n";
  CHECK(tp::write_fully(full, line.data(), line.size()) == ENOSPC);
  ::close(full);
  CHECK(tp::write_fully(full, line.data(), line.size()) == EBADF);
  CHECK(tp::write_fully(full, line.data(), 0) == 0); // nothing to write: no write() at all
}
