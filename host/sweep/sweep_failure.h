// Why a sweep's cell failed, in one line: what `host sweep --keep-going` records in sweep.toml and
// names in its closing summary, so that a grid whose high-lr end diverged says so without the
// reader opening each cell's train.log.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace tp::cli {

/// The size of `cell_dir`/train.log now (0 when it has none): where the next attempt's lines start.
std::uintmax_t train_log_size(const std::filesystem::path& cell_dir);

/// The last error the cell's training logged after `log_offset` (train.log's "[host] error: ..."
/// line, its first sentence, at most 300 characters: "the training loss became non-finite at
/// step 7 (epoch 1, batch 7, lr 100000)"); otherwise what the exit says ("killed by signal 9",
/// "exit code 3, no error in its train.log"). `exit_code` and `killed` are the child's
/// (ChildExit::exit_code, ChildExit::killed).
std::string cell_failure_reason(const std::filesystem::path& cell_dir, std::uintmax_t log_offset, int exit_code,
                                bool killed);

}  // namespace tp::cli
