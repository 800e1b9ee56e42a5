// The message of a caught exception of any kind, for errors that carry another thread's or
// another call's failure on: LibTorch's own without its C++ backtrace (the frames of the host's
// code, which name no plugin and no key a user could change).
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace tp {

/// What `error` says: c10::Error's what_without_backtrace(), any other std::exception's what(),
/// and for an exception of another type "unknown exception (not derived from std::exception)".
/// `error` must not be null.
inline std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

}  // namespace tp
