// The host's own dispatcher ops (framework/src/ops): fused kernels that Tier T plugins reach through
// the SDK (plugin_api/include/tp/cpp/fused_norm.h, fused_pool.h) by looking them up in c10's
// dispatcher, so a plugin never links the framework. Registered for CUDA only, in a CUDA build with
// a CUDA compiler (cmake/TorchhostFusedOps.cmake); elsewhere the SDK finds no schema and keeps the
// unfused ops.
#pragma once

namespace tp::ops {

/// Keeps the ops' registration in the host: tp_framework is a static library, and a linker drops
/// an object file that nothing references, static registrations and all. Calling this (it does
/// nothing) references it. PluginLibrary::load calls it before any plugin is loaded; a test that
/// uses the ops without loading a plugin calls it itself.
void link_fused_ops();

}  // namespace tp::ops
