// What a failed write means to the person running the host: the OS error and, for the errors a
// full disk, a quota or a size limit give, what to do about it. Every writer of the run directory
// words its error with this, so a full disk reads the same whichever file hit it.
#pragma once

#include <string>

namespace tp {

/// `strerror(error)` and a sentence of advice where one helps: "No space left on device. The disk
/// is full: free space or point run.output_dir elsewhere." for ENOSPC; likewise EDQUOT, EFBIG
/// (`ulimit -f`, a quota) and EACCES. Ends with a full stop. Thread safety: [any].
std::string describe_write_error(int error);

}  // namespace tp
