// How `host tune batch-size` reads memory (docs/tune.md): the --memory-limit text, a running
// child's peak resident set size so far, and whether a failed child ran out of memory.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace tp::cli {

/// The --memory-limit text ("4GiB", "512MiB", "1.5GB", "8g", "2000000000") as bytes: a byte size
/// (parse_byte_size() in tp/framework/config/value_kinds.h, which says what it accepts). Throws
/// ConfigError at --memory-limit for anything else or a size that is not positive.
double parse_memory_size(const std::string& text);

/// The peak resident set size so far of the running process `pid` (/proc/<pid>/status VmHWM) in
/// MB (1e6 bytes), NaN when it cannot be read (the process is gone). Cost: one small file read.
double high_water_mb(pid_t pid);

/// Whether a child's captured output says it ran out of memory: a CUDA or CPU allocator's
/// message ("out of memory", "not enough memory", std::bad_alloc, ENOMEM's "cannot allocate
/// memory"), case-insensitive.
bool says_out_of_memory(const std::filesystem::path& output);

}  // namespace tp::cli
