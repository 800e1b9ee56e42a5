#include "load_failure.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace tp::detail {
namespace {

// boost::dll words a failed load as "boost::dll::shared_library::load() failed (dlerror system
// message: TEXT): ERRNO TEXT"; the errno is whatever an earlier call left, never dlopen's.
std::string dlerror_text(const std::string& what) {
  constexpr std::string_view kOpen = "dlerror system message: ";
  const std::size_t begin = what.find(kOpen);
  const std::size_t end = what.rfind(')');
  if (begin == std::string::npos || end == std::string::npos || end < begin + kOpen.size()) return what;
  return what.substr(begin + kOpen.size(), end - begin - kOpen.size());
}

// The symbol after "undefined symbol: " (up to a ", version V" suffix), or "".
std::string undefined_symbol(const std::string& text) {
  constexpr std::string_view kMark = "undefined symbol: ";
  const std::size_t at = text.find(kMark);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + kMark.size();
  const std::size_t end = text.find_first_of(", \n", begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The C++ name of a mangled symbol, or "" for a C one.
std::string demangled(const std::string& symbol) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                                    std::free);
  return status == 0 && name ? std::string(name.get()) : std::string();
}

// Whether `name` (demangled) mentions namespace `space` ("c10") as a whole name: "at::" must not
// match the end of "format::".
bool names_namespace(const std::string& name, std::string_view space) {
  const std::string token = std::string(space) + "::";
  for (std::size_t at = name.find(token); at != std::string::npos; at = name.find(token, at + 1)) {
    const char before = at == 0 ? ' ' : name[at - 1];
    if (std::isalnum(static_cast<unsigned char>(before)) == 0 && before != '_') return true;
  }
  return false;
}

bool is_libtorch_symbol(const std::string& symbol, const std::string& cxx_name) {
  if (symbol.rfind("aoti_torch_", 0) == 0) return true; // the stable C shim
  for (std::string_view space : {"c10", "at", "torch", "caffe2"})
    if (names_namespace(cxx_name, space)) return true;
  return false;
}

}  // namespace

std::string load_failure_message(const std::string& file, const std::string& what) {
  const std::string why = dlerror_text(what);
  std::string message = "cannot load plugin " + file + ": " + why;
  if (why.find("cannot open shared object file") != std::string::npos)
    return message + ". A library it depends on is not installed or not on the loader path: `ldd " + file +
           "` lists it as 'not found'; install it or add its directory to LD_LIBRARY_PATH.";
  const std::string symbol = undefined_symbol(why);
  if (symbol.empty()) return message + ".";
  const std::string cxx_name = demangled(symbol);
  if (!cxx_name.empty()) message += " (" + cxx_name + ")";
  if (is_libtorch_symbol(symbol, cxx_name))
    return message + ". The symbol is LibTorch's, and the LibTorch loaded in this process does not define it: "
                     "either the plugin was built against another LibTorch version (rebuild it against this host's "
                     "SDK), or another LibTorch was loaded first (a program that imported PyTorch before the "
                     "inference library runs PyTorch's LibTorch: one LibTorch per process, docs/deployment.md).";
  return message + ". The plugin references a function that no loaded library defines: a library it needs was not "
                   "linked into it, or its own build left the function out (declared but not compiled). `ldd -r " +
         file + "` lists every undefined symbol; link the library that defines it, or add the missing source.";
}

}  // namespace tp::detail
