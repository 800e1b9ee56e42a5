// link_fused_ops in a build without the fused CUDA ops (a CPU LibTorch, or no CUDA compiler at
// configure time: cmake/TorchhostFusedOps.cmake): nothing to keep, and the SDK's lookup finds no
// schema, so plugins run the unfused ops.
#include "tp/framework/ops/fused_ops.h"

namespace tp::ops {

void link_fused_ops() {}

}  // namespace tp::ops
