// Why dlopen refused a plugin file, in words that fit the cause (PluginLibrary::load).
#pragma once

#include <string>

namespace tp::detail {

/// The message for a plugin `file` whose load failed with `what` (boost::dll's exception text,
/// or dlerror's own): dlerror's text without boost's wrapping (boost appends a stale errno,
/// "Bad file descriptor", that has nothing to do with the failure), then advice for the cause it
/// names. A missing shared library: `ldd FILE` and LD_LIBRARY_PATH. An undefined symbol of
/// LibTorch (its demangled name in c10::, c10d::, at::, torch:: or caffe2::, or a C shim aoti_torch_*): a
/// build against another LibTorch. Another undefined symbol: a function no loaded library
/// defines (a library the plugin did not link, or a function its build left out) and `ldd -r
/// FILE`, which lists every one.
/// Example:
///   load_failure_message("/p/bad.so", "... (dlerror system message: /p/bad.so: undefined symbol: "
///                        "_ZN3c104warnEv): Bad file descriptor")
///   -> "cannot load plugin /p/bad.so: /p/bad.so: undefined symbol: _ZN3c104warnEv (c10::warn()).
///       The symbol is LibTorch's: ..."
std::string load_failure_message(const std::string& file, const std::string& what);

}  // namespace tp::detail
