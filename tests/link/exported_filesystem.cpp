// A library that exports its own std::filesystem::remove_all, as torch 2.11's libtorch.so does with
// the copy of libstdc++ linked into it (pytorch/pytorch#133437). Defining a std function is what
// makes this fixture what it is: the probe must never reach it.
#include <cstdio>
#include <filesystem>

namespace std::filesystem {
uintmax_t remove_all(const path& p) {
  std::printf("the exported copy of remove_all was called for %s\n", p.c_str());
  return 0;
}
}  // namespace std::filesystem
