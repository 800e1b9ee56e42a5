// One write of a whole buffer to a file descriptor: the retry after a signal (EINTR) and after a
// short write that every unbuffered writer of the framework needs (train.log, history.jsonl,
// TensorBoard event files, atomically replaced files).
#pragma once

#include <cstddef>

namespace tp {

/// Writes the `size` bytes at `data` to `fd`, continuing after EINTR and short writes. Returns 0
/// once every byte is written, else the errno of the failed write (ENOSPC when write() wrote
/// nothing without an error); the bytes before it may have been written. Async-signal-safe.
int write_fully(int fd, const void* data, std::size_t size);

}  // namespace tp
