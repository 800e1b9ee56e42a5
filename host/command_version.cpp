// `host --version` (docs/commands.md): the build, for a bug report or a deployment record.
#include <cstdio>

#include "commands.h"
#include "tp/framework/engine/version_text.h"
#include "tp/framework/error.h"

namespace tp::cli {

int print_version() {
  std::printf("%s", host_version_text().c_str());
  return kExitOk;
}

}  // namespace tp::cli
