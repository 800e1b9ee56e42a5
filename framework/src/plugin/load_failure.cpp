#include "load_failure.h"

#include <c10/core/CPUAllocator.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
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

// The object dlopen names before ": undefined symbol: " (the plugin, or a library it pulled in), or "".
std::string failing_object(const std::string& text) {
  const std::size_t at = text.find(": undefined symbol: ");
  return at == std::string::npos ? "" : text.substr(0, at);
}

// Whether `object` is one of LibTorch's own libraries (libtorch*.so, libc10*.so, libcaffe2*.so, or
// any file of a torch/lib directory, where a Python wheel keeps them).
bool is_libtorch_library(const std::filesystem::path& object) {
  const std::string name = object.filename().string();
  const std::filesystem::path dir = object.parent_path();
  const bool torch_lib = dir.filename() == "lib" && dir.parent_path().filename() == "torch";
  return torch_lib || name.starts_with("libtorch") || name.starts_with("libc10") || name.starts_with("libcaffe2");
}

// The directory of the LibTorch this process runs (where its libc10 was loaded from), or "".
std::filesystem::path loaded_libtorch_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&c10::GetCPUAllocator), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code unresolved;
  const std::filesystem::path file = std::filesystem::weakly_canonical(info.dli_fname, unresolved);
  return unresolved ? std::filesystem::path(info.dli_fname).parent_path() : file.parent_path();
}

// The directory of `object` when it is LibTorch's own library of another directory than the
// LibTorch this process runs: the plugin pulled in a second LibTorch (its RUNPATH names the one
// it was built against), whatever the missing symbol is. "" otherwise.
std::string other_libtorch_dir(const std::string& object) {
  if (object.empty() || !is_libtorch_library(object)) return "";
  std::error_code unresolved;
  std::filesystem::path dir = std::filesystem::weakly_canonical(object, unresolved).parent_path();
  if (unresolved) dir = std::filesystem::path(object).parent_path();
  const std::filesystem::path loaded = loaded_libtorch_dir();
  return loaded.empty() || dir == loaded ? "" : dir.string();
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
  // c10d: the distributed backends (ProcessGroup, Backend), in libtorch_cpu as the rest.
  for (std::string_view space : {"c10", "c10d", "at", "torch", "caffe2"})
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
  // Serving trial F4: a plugin built against a Python wheel's LibTorch failed inside that wheel's
  // libtorch_nvshmem.so, and was sent to re-link; the object's directory alone tells the cause.
  if (const std::string other = other_libtorch_dir(failing_object(why)); !other.empty())
    return message + ". The library that lacks it is LibTorch's own, from " + other + ", but this process runs the "
                     "LibTorch of " + loaded_libtorch_dir().string() + ": the plugin was built against another "
                     "LibTorch, whose libraries its RUNPATH (or LD_LIBRARY_PATH) pulls in beside this one. Rebuild "
                     "the plugin against this host's SDK (one LibTorch per process, docs/deployment.md).";
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
