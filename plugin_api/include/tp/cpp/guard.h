// torchhost C++ helpers for plugin authors: TP_GUARD, which keeps exceptions off the C ABI.
//
// Every exported function of a C++ plugin wraps its body in TP_GUARD(host, { ... }). An exception
// becomes a status code plus a message recorded through host->fail() (PLG-7):
// c10::OutOfMemoryError (a device allocation failed) -> TP_ERR_OUT_OF_MEMORY, which train.on_oom
// acts on, and any other c10::Error -> TP_ERR_INTERNAL, both with what_without_backtrace() (Tier T
// only), std::bad_alloc -> TP_ERR_OUT_OF_MEMORY, tp::cpp::Failure -> its own code, std::exception -> TP_ERR_INTERNAL,
// anything else -> TP_ERR_INTERNAL with "unknown exception". tp::cpp::HostFailure (a host service
// failed and recorded its own message) -> its code, without calling fail(), which would replace it.
#ifndef TP_CPP_GUARD_H
#define TP_CPP_GUARD_H

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "tp/host.h"
#include "tp/status.h"

#if __has_include(<c10/util/Exception.h>) && defined(TP_PLUGIN_TIER_T)
#include <c10/util/Exception.h>
#define TP_DETAIL_CATCH_C10(host)                                                \
  catch (const c10::OutOfMemoryError& e) {                                       \
    return detail::fail(host, TP_ERR_OUT_OF_MEMORY, e.what_without_backtrace()); \
  }                                                                              \
  catch (const c10::Error& e) {                                                  \
    return detail::fail(host, TP_ERR_INTERNAL, e.what_without_backtrace());      \
  }
#else
#define TP_DETAIL_CATCH_C10(host)
#endif

namespace tp::cpp {

/// An error with an explicit tp_status code. Throw it from plugin code, e.g.
/// `throw tp::cpp::Failure(TP_ERR_IO, "cannot open " + path);`
class Failure : public std::runtime_error {
 public:
  /// `code` must not be TP_OK.
  Failure(tp_status code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The status the guard returns.
  tp_status code() const noexcept { return code_; }

 private:
  tp_status code_;
};

/// A host service's failure whose message the host has already recorded (tp.dist/2, host.h): the
/// guard returns its code without calling host->fail(), so the host's message is what the user
/// reads. Thrown by the SDK's service wrappers (tp/cpp/dist.h).
class HostFailure : public Failure {
 public:
  HostFailure(tp_status code, const std::string& call)
      : Failure(code, call + " failed; the host recorded the reason with the status") {}
};

namespace detail {
inline tp_status fail(const tp_host_t* host, tp_status code, const char* message) noexcept {
  if (host != nullptr && host->fail != nullptr) return host->fail(host, code, message);
  return code;
}
}  // namespace detail

/// Calls `body` (returning tp_status) and converts any exception into a status recorded through
/// `host` (which may be NULL before init). Never throws.
template <typename Body>
tp_status guard(const tp_host_t* host, Body&& body) noexcept {
  try {
    return body();
  } catch (const HostFailure& e) {
    return e.code();
  } catch (const Failure& e) {
    return detail::fail(host, e.code(), e.what());
  }
  TP_DETAIL_CATCH_C10(host)
  catch (const std::bad_alloc& e) {
    return detail::fail(host, TP_ERR_OUT_OF_MEMORY, e.what());
  } catch (const std::exception& e) {
    return detail::fail(host, TP_ERR_INTERNAL, e.what());
  } catch (...) {
    return detail::fail(host, TP_ERR_INTERNAL, "unknown exception");
  }
}

}  // namespace tp::cpp

/// Returns from the enclosing C entry point with the status of the braced body, converting any
/// exception into a status recorded through `host`. Example:
///   tp_status my_size(const void* self, uint64_t* out_count) {
///     TP_GUARD(plugin_host(), { *out_count = as_dataset(self).size(); return TP_OK; });
///   }
#define TP_GUARD(host, ...) return ::tp::cpp::guard((host), [&]() -> tp_status __VA_ARGS__)

#endif  // TP_CPP_GUARD_H
