// The flags one accumulation window's agreement carries (Collectives::agree: ORed over ranks):
// the run's reasons to stop or save, which RunControl raises and reads, and the step's own,
// which StepRunner raises. Their own header so that the step sees the flags, not the control.
#pragma once

#include <array>
#include <cstdint>

#include "tp/framework/engine/stop_signal.h"

namespace tp {

/// Flags a window's agreement carries (Collectives::agree: ORed over ranks).
enum WindowFlag : uint32_t {
  kFlagStopRequest = 1u << 0, ///< a deferred callback TP_REQUEST_STOP
  kFlagSaveRequest = 1u << 1, ///< a deferred callback TP_REQUEST_SAVE
  kFlagTimeUp = 1u << 2,      ///< train.max_time is used up on this rank's clock
  kFlagSigTerm = 1u << 3,     ///< SIGTERM reached this rank
  kFlagNonFinite = 1u << 4,   ///< the step: a non-finite training loss in the window
  kFlagSplit = 1u << 5,       ///< the step: this rank cut micro-batches after running out of memory
  kFlagHasBatch = 1u << 6,    ///< the step: this rank trained at least one non-empty micro-batch
  kFlagWriteFailed = 1u << 7, ///< rank 0 failed to write a run file (rank0_write)
  kFlagSigUsr1 = 1u << 8,     ///< SIGUSR1 (SLURM's requeue warning) reached this rank
  kFlagSigInt = 1u << 9,      ///< SIGINT reached this rank
  /// An evaluation only (never in a window's agreement): another rank left the note that a stop
  /// signal reached it (RunControl::evaluation_stop_flags), so this one stops its pass too.
  kFlagPeerStop = 1u << 10,
  kFlagSigHup = 1u << 11,     ///< SIGHUP (the session went away) reached this rank
  kFlagSigUsr2 = 1u << 12,    ///< SIGUSR2 (a scheduler's warning, `--signal=USR2`) reached this rank
  // Collectives::agree carries the low 16 bits (collectives.cpp, kAgreedBits).
};

/// Each stop signal's bit, in kStopSignals' order (stop_signal.h: SIGUSR1, SIGUSR2, SIGTERM, SIGHUP,
/// SIGINT, their precedence): one per signal, so that every rank learns which signal stops the run, not only
/// that one does.
inline constexpr std::array<uint32_t, kStopSignals.size()> kSignalFlags{kFlagSigUsr1, kFlagSigUsr2, kFlagSigTerm, kFlagSigHup,
                                                                               kFlagSigInt};

/// The stop signals' bits together.
inline constexpr uint32_t kFlagsSignal = [] {
  uint32_t all = 0;
  for (const uint32_t flag : kSignalFlags) all |= flag;
  return all;
}();

}  // namespace tp
