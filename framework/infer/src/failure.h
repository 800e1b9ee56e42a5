// Whose fault a failure is (tp::infer::Error::Kind, model.h): every exception the framework,
// a plugin or LibTorch throws under the API becomes an Error of one kind, which the C API carries
// to its status (serving trial F2: a corrupt upload and a missing plugin were both TP_ERR_IO).
#pragma once

#include <string_view>

#include "tp/infer/model.h"

namespace tp::infer::detail {

/// How one API call's failures read: the kinds that depend on what the call was given.
struct FailureKinds {
  /// An exception of no kind rethrow_as_error knows: Setup while opening (every piece read there
  /// is the deployment's), Internal during a call.
  Error::Kind otherwise = Error::Kind::Internal;
  /// A plugin call's TP_ERR_INVALID_ARGUMENT or TP_ERR_OUT_OF_RANGE: BadInput where the caller
  /// made the inputs (run_tensors), Internal where the export's preprocessing made them.
  Error::Kind refused_input = Error::Kind::Internal;
};

/// [in a catch block] The exception being handled as tp::infer::Error, thrown: an Error as it is;
/// std::bad_alloc, c10::OutOfMemoryError, LibTorch's allocator's failure and a plugin call's
/// TP_ERR_OUT_OF_MEMORY as OutOfMemory; a plugin that cannot load, a component table refused or
/// weights that do not fit (PluginLoadError, ConfigError, CheckpointError) as Setup, as is a
/// plugin's create or prepare failing; a plugin call's refusal of its input as `kinds.refused_input`;
/// anything else as `kinds.otherwise`. The message is the exception's, after "tp::infer: ".
[[noreturn]] void rethrow_as_error(const FailureKinds& kinds);

/// Whether `message` is an allocation failure's: LibTorch's CPU allocator throws a plain
/// c10::Error ("DefaultCPUAllocator: not enough memory: you tried to allocate N bytes"), which
/// a plugin's TP_GUARD reports as TP_ERR_INTERNAL, so only its words tell it.
bool names_allocation_failure(std::string_view message);

/// Runs `body`, turning whatever it throws into tp::infer::Error (rethrow_as_error), so that
/// callers catch one type whose kind says whose fault it is.
template <class Body>
auto guarded(const FailureKinds& kinds, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    rethrow_as_error(kinds);
  }
}

}  // namespace tp::infer::detail
