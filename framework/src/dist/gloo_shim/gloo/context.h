// Declaration shim for ProcessGroupGloo.hpp (see ../README.md). setTimeout is named by an inline
// virtual of ProcessGroupGloo whose code is emitted in libtorch_cpu, not here.
#pragma once
#include <chrono>
namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
