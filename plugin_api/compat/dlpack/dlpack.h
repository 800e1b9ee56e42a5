/* torchhost plugin SDK: <dlpack/dlpack.h> for plugins written against the earlier SDKs whose
 * tp/iface/dataset.h included Debian's libdlpack-dev header and whose docs told plugins to
 * `#include <dlpack/dlpack.h>` (ABI 1.0 to 1.2). The SDK now pins its own copy, tp/dlpack.h; this header forwards
 * to it, so such a plugin compiles unchanged against an installed SDK on a machine without
 * libdlpack-dev.
 *
 * Where it lives: the SDK installs it as <prefix>/include/torchhost/compat/dlpack/dlpack.h, a
 * directory of its own that only targets linking torchhost::plugin_api search (after
 * <prefix>/include). It is never installed as <prefix>/include/dlpack/dlpack.h, which would
 * overwrite libdlpack-dev's file for a /usr prefix, or shadow it for every other project for a
 * /usr/local prefix.
 *
 * Include order: a plugin's include directories come before the compiler's system directories,
 * so `#include <dlpack/dlpack.h>` in a plugin finds this file even where /usr/include/dlpack
 * exists, and the plugin compiles against the DLPack the ABI pins (tp/dlpack.h explains why that
 * matters). Every dlpack.h (this one's target, libdlpack-dev's, LibTorch's <ATen/dlpack.h>) uses
 * the guard DLPACK_DLPACK_H_: a translation unit that reaches a second one by another path gets
 * the types once, from whichever came first. TP_DLPACK_COMPAT says this file was used. */
#ifndef TP_COMPAT_DLPACK_DLPACK_H
#define TP_COMPAT_DLPACK_DLPACK_H

/** Defined when a plugin's <dlpack/dlpack.h> resolved to the SDK's forwarding header. */
#define TP_DLPACK_COMPAT 1

#include "tp/dlpack.h"

#endif /* TP_COMPAT_DLPACK_DLPACK_H */
