// What `host --version` prints: the host's build and what it was built with.
#pragma once

#include <string>

namespace tp {

/// Lines naming the host's version (`git describe` at build time), the plugin ABI it speaks, the
/// compiler and build type, LibTorch, and where present CUDA, cuDNN and NCCL: the build's part of
/// every run's provenance (runtime.toml, checkpoints), for a bug report or a deployment record.
std::string host_version_text();

}  // namespace tp
