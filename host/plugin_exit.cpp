// exit() as the host executable defines it: a plugin that calls exit() (PLG-7 forbids it) ends the
// run as a plugin crash, exit 5 and named (plugin_crash.h), instead of with its own status, 0 for
// exit(0): a half-trained run a pipeline would count as a success.
//
// Why a definition here and not an atexit handler: the C library runs exit handlers and static
// destructors while the other threads train on; a handler registered at start runs after the
// destructors of everything made since (LibTorch's lazily built registries, the plugins' libraries),
// and the main thread, in backward, then crashed on a destroyed registry (exit 139 under load).
// The executable's definition interposes the C library's for every library it loads, plugins
// included; any other caller (the host, LibTorch) gets the C library's exit unchanged.
#include <dlfcn.h>

#include <cstdlib>

#include "tp/framework/plugin/plugin_crash.h"

extern "C" void exit(int status) noexcept {
  tp::end_exit_inside_plugin_call(status); // returns outside a plugin call
  using ExitFunction = void (*)(int);
  const auto c_library_exit = reinterpret_cast<ExitFunction>(::dlsym(RTLD_NEXT, "exit"));
  c_library_exit(status);
  __builtin_unreachable();
}
