// A process that opened a model, then forks (a pre-fork server: gunicorn --preload, Celery
// prefork, multiprocessing's "fork"): the child's calls answer, on one intra-op thread (serving
// trial F7: every child hung in GNU OpenMP's barrier on its first call, waiting for the parent's
// pool threads that fork does not copy). The child reports through its exit status; the parent
// waits with a deadline, so a hang fails the case instead of the suite.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "infer_support.h"

namespace {

using tp::test::infer::cpu_options;
using tp::test::infer::Exported;

/// Runs `child` in a forked child and returns its exit status; -1 when it ran past `deadline`
/// (then killed) or did not exit normally.
template <class Child>
int in_forked_child(Child child, std::chrono::seconds deadline) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int status = 3;
    try {
      status = child();
    } catch (...) {
      status = 2;
    }
    ::_exit(status); // no atexit handlers, no doctest report: the parent's
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("tp::infer: a child forked after open answers on its own thread, on the parent's model and on its own") {
  const Exported& run = tp::test::infer::exported();
  tp::infer::OpenOptions options = cpu_options();
  options.threads = 2; // an OpenMP team of more than one thread, as every default count on 2 cores or more
  tp::infer::Model model = tp::infer::Model::open(run.exported.string(), options);
  const tp::infer::Batch before = model.run_files({run.files[0], run.files[1]}, 1);
  const std::vector<float> expected = before.output("logits").values;

  const int status = in_forked_child(
      [&] {
        // The parent's model, inherited: it set 2 threads, the child runs on 1.
        const tp::infer::Batch inherited = model.run_files({run.files[0], run.files[1]}, 1);
        if (inherited.output("logits").values.size() != expected.size()) return 10;
        // A model the child opens itself (open copies the weights on the intra-op threads).
        tp::infer::Model own = tp::infer::Model::open(run.exported.string(), options);
        const tp::infer::Batch answered = own.run_files({run.files[0], run.files[1]}, 1);
        return answered.output("logits").values.size() == expected.size() ? 0 : 11;
      },
      std::chrono::seconds(60));
  INFO("child exit status (-1: hung, killed after 60 s; 2: an exception)");
  CHECK(status == 0);
  // The parent keeps its threads.
  CHECK(model.run_files({run.files[0], run.files[1]}, 1).output("logits").values == expected);
}
