// Security trial F3: a FIFO or a device given as a weight file. `--resume FIFO`, `host export
// --checkpoint FIFO` and `train.init_weights = FIFO` blocked in open() for good (SIGTERM and
// Ctrl-C are caught by `host train`, so only SIGKILL ended it, with run.lock held), and
// train.init_weights = /dev/zero was read until memory ran out. Before the fix these cases did
// not return within their limit (a writer opened here then let them go on) or named no FIFO or
// device; now each is refused at once, naming the file and what it is.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/initial_weights.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

/// A new FIFO no process writes.
fs::path make_fifo(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tp_special_file_weights_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fifo = dir / name;
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  return fifo;
}

/// What `read` threw (its exit code and message), run with a limit of 10 s. A read still
/// blocked on `fifo` then is let go (a writer opens and closes the FIFO) so that the test fails
/// instead of hanging; `returned_in_time` says which happened.
struct Outcome {
  bool returned_in_time = false;
  int exit_code = 0;
  std::string message;
};

Outcome refusal_of(const std::function<void()>& read, const fs::path& fifo) {
  auto done = std::async(std::launch::async, [&] {
    Outcome outcome;
    try {
      read();
    } catch (const tp::Error& e) {
      outcome.exit_code = e.exit_code();
      outcome.message = e.what();
    }
    return outcome;
  });
  const bool in_time = done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!in_time && !fifo.empty()) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  Outcome outcome = done.get();
  outcome.returned_in_time = in_time;
  return outcome;
}

}  // namespace

TEST_CASE("--resume and host export --checkpoint refuse a FIFO at once, exit 4, naming it") {
  const fs::path fifo = make_fifo("last.pt");
  const Outcome outcome = refusal_of([&] { tp::load_checkpoint(fifo); }, fifo);
  INFO(outcome.message);
  CHECK(outcome.returned_in_time);
  CHECK(outcome.exit_code == tp::kExitCheckpoint);
  CHECK(outcome.message.find("checkpoint " + fifo.string() + " is a FIFO, not a regular file") != std::string::npos);
}

TEST_CASE("train.init_weights refuses a FIFO and a device at once, exit 2, naming the key and the file") {
  const std::vector<tp::StateTensor> model{{"w", at::zeros({4}), false}};
  const fs::path fifo = make_fifo("init.safetensors");
  const Outcome from_fifo = refusal_of([&] { tp::load_initial_weights(fifo, model); }, fifo);
  INFO(from_fifo.message);
  CHECK(from_fifo.returned_in_time);
  CHECK(from_fifo.exit_code == tp::kExitConfig);
  CHECK(from_fifo.message.find("train.init_weights = \"" + fifo.string() + "\": the file is a FIFO, not a regular file") !=
        std::string::npos);
  // /dev/null: a device read as an empty file before; /dev/zero (not read here: before the fix
  // it took all memory) is refused by the same fstat.
  const Outcome from_device = refusal_of([&] { tp::load_initial_weights("/dev/null", model); }, {});
  INFO(from_device.message);
  CHECK(from_device.exit_code == tp::kExitConfig);
  CHECK(from_device.message.find("is a character device, not a regular file") != std::string::npos);
}
