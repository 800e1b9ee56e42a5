// What a failed write means to the person running the host: the OS error and, for the errors a
// full disk, a quota or a size limit give, what to do about it. Every writer of the run directory
// words its error with this, so a full disk reads the same whichever file hit it.
#pragma once

#include <filesystem>
#include <string>

namespace tp {

/// `strerror(error)` and a sentence of advice where one helps: "No space left on device. The disk
/// is full: free space or point run.output_dir elsewhere." for ENOSPC; likewise EDQUOT, EFBIG
/// (`ulimit -f`, a quota) and EACCES. Ends with a full stop. Thread safety: [any].
std::string describe_write_error(int error);

/// describe_write_error for a failed open of `file` for writing. Where the OS refused (EACCES,
/// EPERM) and `file` exists, the permission that failed is the file's, not its directory's, so
/// the sentence names the file's owner, group and mode and this process's uid, and says how a
/// team lets a teammate write (umask 002; `chmod g+w` on what was created before). Example:
/// "Permission denied: the file exists, owned by uid 1001 (alice), group 1001, mode 0644, which
/// does not let you (uid 1002, bob) write to it. ...". Thread safety: [any].
std::string describe_open_error(const std::filesystem::path& file, int error);

}  // namespace tp
