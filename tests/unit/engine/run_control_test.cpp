// RunControl, the one owner of stop and save decisions: each reason alone, two on one step, and
// the agreement that makes a reason raised on one rank every rank's (a two-rank Collectives
// double ORs the flags both ranks bring, as the c10d implementation's all-reduce does; the real
// two-rank run is tests/dist/ddp_test.cpp, "a stop requested on one rank").
#include "engine/training/run_control.h"

#include <ATen/ATen.h>

#include <bit>
#include <csignal>
#include <cstddef>

#include "tp/framework/dist/collectives.h"
#include "tp/framework/error.h"
#include "tp/iface/callback.h"

#include <doctest/doctest.h>

namespace {

using tp::ResumePosition;
using tp::RunControl;
using tp::StopCause;

/// A fresh control over a single process with `budget`.
struct Single {
  explicit Single(tp::RunBudget budget = tp::RunBudget(0, 0.0))
      : budget_(budget), control(*collectives, budget_, "00:00:01") {}
  std::unique_ptr<tp::Collectives> collectives = tp::single_process_collectives(c10::Device(c10::kCPU));
  tp::RunBudget budget_;
  RunControl control;
};

/// Raises nothing of its own: the window's flags are what the caller agreed.
void step_window(RunControl& control, int64_t step) {
  control.window_agreed(control.take_window_flags(), step, ResumePosition{0, step});
}

}  // namespace

TEST_CASE("no reason: the run neither stops nor saves") {
  Single s;
  step_window(s.control, 1);
  CHECK_FALSE(s.control.stop());
  CHECK_FALSE(s.control.take_save());
  CHECK(s.control.signal() == 0);
  CHECK_FALSE(s.control.pause().has_value());
  CHECK(s.control.reason().empty());
}

TEST_CASE("each reason alone") {
  SUBCASE("a deferred callback stop is honoured at the window boundary, not before") {
    Single s;
    s.control.defer(TP_REQUEST_STOP);
    CHECK_FALSE(s.control.stop());
    step_window(s.control, 3);
    CHECK(s.control.stop());
    CHECK(s.control.stopped_early());
    CHECK(s.control.reason() == "a callback requested a stop");
  }
  SUBCASE("a deferred callback stop taken for a window that was never agreed rides with the next one") {
    Single s;
    s.control.defer(TP_REQUEST_STOP | TP_REQUEST_SAVE);
    const uint32_t taken = s.control.take_window_flags();  // the loader ran dry inside the window
    s.control.return_unagreed(taken);
    step_window(s.control, 4);
    CHECK(s.control.stop());
    CHECK(s.control.take_save());
    CHECK(s.control.reason() == "a callback requested a stop");
  }
  SUBCASE("a deferred callback save is taken once") {
    Single s;
    s.control.defer(TP_REQUEST_SAVE);
    step_window(s.control, 3);
    CHECK_FALSE(s.control.stop());
    CHECK(s.control.take_save());
    CHECK_FALSE(s.control.take_save());
  }
  SUBCASE("an immediate callback request (STEP_END, EVAL_END, EPOCH_END)") {
    Single s;
    s.control.honour_now(TP_REQUEST_STOP | TP_REQUEST_SAVE, true);
    CHECK(s.control.stop());
    CHECK(s.control.take_save());
    CHECK(s.collectives->calls() == 1); // one agreement
  }
  SUBCASE("without callbacks an immediate request costs no collective") {
    Single s;
    s.control.honour_now(0, false);
    CHECK(s.collectives->calls() == 0);
    CHECK_FALSE(s.control.stop());
  }
  SUBCASE("train.max_time: stops, saves where it stopped, and counts as stopping early") {
    Single s(tp::RunBudget(0, 1e-9)); // any elapsed time uses it up
    s.budget_.start();
    const uint32_t flags = s.control.take_window_flags();
    CHECK((flags & tp::kFlagTimeUp) != 0);
    s.control.window_agreed(flags, 7, ResumePosition{2, 5});
    REQUIRE(s.control.pause().has_value());
    CHECK(s.control.pause()->epoch == 2);
    CHECK(s.control.pause()->batch == 5);
    CHECK(s.control.stop());
    CHECK(s.control.stopped_early());
    CHECK(s.control.reason().find("train.max_time (00:00:01) is used up at step 7") == 0);
  }
  SUBCASE("a callback's stop inside an epoch pauses the run there; with another reason it ends") {
    Single s;
    s.control.defer(TP_REQUEST_STOP);
    s.control.window_agreed(s.control.take_window_flags(), 4, ResumePosition{0, 4});
    CHECK_FALSE(s.control.pause().has_value()); // the loop has not left its epoch yet
    s.control.left_epoch_early(ResumePosition{0, 4});
    REQUIRE(s.control.pause().has_value());
    CHECK(s.control.pause()->epoch == 0);
    CHECK(s.control.pause()->batch == 4);
    CHECK(s.control.reason() == "a callback requested a stop inside epoch 1; saved where it stopped (--resume auto "
                                "trains the epoch's remaining batches)");
    Single ended;
    ended.control.defer(TP_REQUEST_STOP);
    ended.control.window_agreed(ended.control.take_window_flags(), 4, ResumePosition{0, 4});
    ended.control.stop_for(StopCause::kEarlyStopping, "early stopping: val/loss did not improve");
    ended.control.left_epoch_early(ResumePosition{0, 4});
    CHECK_FALSE(ended.control.pause().has_value());
  }
  SUBCASE("train.max_steps: stops, but is the planned end, not an early stop") {
    Single s(tp::RunBudget(4, 0.0));
    step_window(s.control, 3);
    CHECK_FALSE(s.control.stop());
    step_window(s.control, 4);
    CHECK(s.control.stop());
    CHECK_FALSE(s.control.stopped_early());
  }
  SUBCASE("early stopping, decided alike on every rank") {
    Single s;
    s.control.stop_for(StopCause::kEarlyStopping, "early stopping: val/loss did not improve");
    CHECK(s.control.stop());
    CHECK(s.control.stopped_early());
    CHECK(s.collectives->calls() == 0);
  }
  SUBCASE("a signal some rank saw stops this rank, which saw none, with that signal") {
    // Cluster trial F1: a rank that agreed before its own SIGUSR1 arrived took SIGTERM and exited
    // 143 beside the others' 138, so srun's code defeated the requeue on 138.
    const std::pair<int, uint32_t> signals[] = {{SIGUSR1, tp::kFlagSigUsr1}, {SIGUSR2, tp::kFlagSigUsr2},
                                                 {SIGTERM, tp::kFlagSigTerm}, {SIGHUP, tp::kFlagSigHup},
                                                 {SIGINT, tp::kFlagSigInt}};
    for (const auto& [signal_number, bit] : signals) {
      Single s;
      s.control.window_agreed(bit, 2, ResumePosition{0, 2});
      CHECK(s.control.signal() == signal_number);
    }
  }
}

TEST_CASE("ranks that saw different stop signals agree on one: SIGUSR1, SIGUSR2, SIGTERM, SIGHUP, then SIGINT") {
  CHECK(tp::agreed_signal(0) == 0);
  CHECK(tp::agreed_signal(tp::kFlagStopRequest | tp::kFlagTimeUp | tp::kFlagPeerStop) == 0);
  CHECK(tp::agreed_signal(tp::kFlagSigInt) == SIGINT);
  CHECK(tp::agreed_signal(tp::kFlagSigInt | tp::kFlagSigHup) == SIGHUP);
  CHECK(tp::agreed_signal(tp::kFlagSigHup | tp::kFlagSigTerm) == SIGTERM);
  CHECK(tp::agreed_signal(tp::kFlagSigInt | tp::kFlagSigTerm) == SIGTERM);
  CHECK(tp::agreed_signal(tp::kFlagSigTerm | tp::kFlagSigUsr2) == SIGUSR2);
  CHECK(tp::agreed_signal(tp::kFlagSigUsr2 | tp::kFlagSigUsr1) == SIGUSR1);
  CHECK(tp::agreed_signal(tp::kFlagSigTerm | tp::kFlagSigUsr1) == SIGUSR1);
  // Every bit below Collectives::agree's 16 and apart from the others'.
  CHECK(tp::kFlagsSignal < (1u << 16));
  CHECK(std::popcount(tp::kFlagsSignal) == static_cast<int>(tp::kStopSignals.size()));
  CHECK(tp::agreed_signal(tp::kFlagsSignal) == SIGUSR1);
  // The first agreed signal stays: one arriving during the save does not change the exit code.
  Single s;
  s.control.window_agreed(tp::kFlagSigTerm, 2, ResumePosition{0, 2});
  s.control.window_agreed(tp::kFlagSigUsr1, 3, ResumePosition{0, 3});
  CHECK(s.control.signal() == SIGTERM);
}

TEST_CASE("two reasons on one step: both are kept, in the order raised") {
  Single s(tp::RunBudget(5, 1e-9));
  s.budget_.start();
  s.control.defer(TP_REQUEST_STOP | TP_REQUEST_SAVE);
  s.control.window_agreed(s.control.take_window_flags(), 5, ResumePosition{1, 0});
  CHECK(s.control.stop());
  CHECK(s.control.take_save());
  REQUIRE(s.control.pause().has_value());
  const std::string reason = s.control.reason();
  CHECK(reason.find("a callback requested a stop; train.max_time") == 0);
  CHECK(reason.find("train.max_steps reached at step 5") != std::string::npos);
  // A second reason of a kind already given adds nothing.
  s.control.stop_for(StopCause::kCallback, "another callback");
  CHECK(s.control.reason() == reason);
}

TEST_CASE("a reason raised on one rank only becomes every rank's decision") {
  // Two ranks' controls; the agreement ORs what each brings (Collectives::agree's contract).
  Single rank0, rank1;
  rank1.control.defer(TP_REQUEST_STOP); // a callback on rank 1 only
  const uint32_t agreed = rank0.control.take_window_flags() | rank1.control.take_window_flags();
  rank0.control.window_agreed(agreed, 4, ResumePosition{0, 4});
  rank1.control.window_agreed(agreed, 4, ResumePosition{0, 4});
  CHECK(rank0.control.stop());
  CHECK(rank1.control.stop());
  CHECK(rank0.control.reason() == rank1.control.reason());
}

TEST_CASE("the single-process agreement is the identity and reads nothing") {
  auto collectives = tp::single_process_collectives(c10::Device(c10::kCPU));
  const at::Tensor sums = at::tensor({3.0, 4.0}, at::kDouble);
  const tp::Agreement agreed = collectives->agree(0x5u, sums, "test");
  CHECK(agreed.flags == 0x5u);
  CHECK(agreed.sums.is_same(sums));
  CHECK(collectives->calls() == 1);
  CHECK(collectives->world_size() == 1);
}

TEST_CASE("a failed rank-0 write: a single process throws it at once; settling with nothing failed passes") {
  Single s;
  CHECK_THROWS_WITH(s.control.rank0_write([] { throw tp::Error("disk full writing history.jsonl"); }),
                    "disk full writing history.jsonl");
  s.control.rank0_write([] {});
  CHECK((s.control.take_window_flags() & tp::kFlagWriteFailed) == 0);
  CHECK_NOTHROW(s.control.settle_writes("test"));
}

TEST_CASE("an agreement that carries a failed rank-0 write ends the rank that did not fail, quoting it") {
  // The rank that did not fail learns rank 0's message through first_failure (here the single
  // process's, which names rank 0) and throws it, where before it went on to the next collective.
  Single rank1;
  CHECK_THROWS_WITH(rank1.control.window_agreed(tp::kFlagWriteFailed, 7, ResumePosition{0, 7}),
                    doctest::Contains("writing the run's files failed on"));
}

// The stop signals were written out three times (the handlers, these bits and their precedence,
// the launcher's forwarding): one list now, kStopSignals, which the others read.
TEST_CASE("the stop signals are one list: each has a bit of its own, agreed in the list's order") {
  uint32_t seen = 0;
  for (std::size_t i = 0; i < tp::kStopSignals.size(); ++i) {
    const uint32_t bit = tp::kSignalFlags[i];
    CHECK(std::popcount(bit) == 1);
    CHECK((seen & bit) == 0);
    seen |= bit;
    uint32_t later = 0; // the signals this one takes precedence over
    for (std::size_t j = i + 1; j < tp::kStopSignals.size(); ++j) later |= tp::kSignalFlags[j];
    CHECK(tp::agreed_signal(bit | later) == tp::kStopSignals[i]);
    Single s;
    s.control.window_agreed(bit, 2, ResumePosition{0, 2});
    CHECK(s.control.signal() == tp::kStopSignals[i]);
  }
  CHECK(seen == tp::kFlagsSignal);
}
