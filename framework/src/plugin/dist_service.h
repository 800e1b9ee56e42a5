// The "tp.dist/2" service (plugin_api/include/tp/host.h, ABI 1.14): all_reduce and an
// autograd-aware all_gather that plugins run on the host's own process group, through the
// HostServices that serves them (no table of its own outside it: ARCH-6's owner stays the host).
#pragma once

#include "tp/host.h"

namespace tp {

/// The "tp.dist/2" table: `place`'s members (tp.dist/1's, in the same order) and the host's
/// all_reduce and all_gather, which find their process group through the `host` they are given
/// (host_data is the HostServices).
tp_dist_v2_t dist_v2_table(const tp_dist_v1_t& place);

}  // namespace tp
