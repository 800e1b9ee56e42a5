// Security trial F3, the inference library's side: tp_infer_open / Model::open on a FIFO waited
// in open() for a writer for good, and on /dev/zero (or a link to it) read until memory ran out
// (std::bad_alloc). Before the fix the FIFO case did not return within its limit (a writer opened
// here then let it go on); now both are refused at once, naming the file and what it is.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include <doctest/doctest.h>

#include "error_of.h"
#include "infer_support.h"
#include "tp/infer/model.h"

namespace {

namespace fs = std::filesystem;
using tp::test::error_of;
using tp::test::infer::cpu_options;

}  // namespace

TEST_CASE("tp::infer: a FIFO or a device given as the export is refused at once, naming it") {
  const fs::path dir = fs::temp_directory_path() / ("tp_infer_special_file_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fifo = dir / "model.safetensors";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto opened = std::async(std::launch::async, [&] { return error_of([&] { tp::infer::Model::open(fifo.string(), cpu_options()); }); });
  const bool in_time = opened.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!in_time) { // lets a blocked open() go on, so that the test fails instead of hanging
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  const std::string from_fifo = opened.get();
  INFO(from_fifo);
  CHECK(in_time);
  CHECK(from_fifo.find("cannot read the export '" + fifo.string() + "': it is a FIFO, not a regular file") !=
        std::string::npos);

  // A link to /dev/zero: read until memory ran out before; /dev/null stands in for the device.
  const fs::path zero = dir / "zero.safetensors";
  fs::remove(zero);
  fs::create_symlink("/dev/null", zero);
  const std::string from_device = error_of([&] { tp::infer::Model::open(zero.string(), cpu_options()); });
  INFO(from_device);
  CHECK(from_device.find("is a character device, not a regular file") != std::string::npos);
  fs::remove_all(dir);
}
