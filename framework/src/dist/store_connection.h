// Reaching the rendezvous store within dist.timeout_s of wall clock, whatever listens on its port
// (cluster trial F6): the one bounded wait around c10d's TCPStore constructor.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <string>

namespace tp {

/// [all ranks] c10d's TCPStore at `host` with `options`, made within options.timeout of wall
/// clock. A client's constructor bounds neither its connection retries (a lone rank 1 with nothing
/// listening took about twice the timeout) nor its first exchange with whatever accepted the
/// connection (a listener that never answers held it until that listener went away: 187 s for
/// dist.timeout_s = 20). So a client is made on a thread of its own and given up after the
/// timeout: throws tp::Error saying nothing answered in time, and leaves that thread blocked, to
/// end with the process (the error ends the run). c10d's own errors pass through as they are. The
/// server (rank 0 binding the port) is made on the calling thread: its failures are immediate (the
/// port in use) or bounded by c10d (ranks that never come).
c10::intrusive_ptr<c10d::Store> connect_store(const std::string& host, const c10d::TCPStoreOptions& options);

}  // namespace tp
