// Which samples `host plugins check` reads from a split (--samples, --index) and how it says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/plugin/plugin_check.h"

namespace tp::detail {

/// By default the first, the last, a few spread by a fixed hash (the same on every check, so a
/// failure reproduces); with --samples N, N spread evenly (first and last included); with
/// --samples all, every one; then the caller's --index ones, those past the end named in `skipped`.
std::vector<uint64_t> indices_to_read(uint64_t size, const CheckOptions& options, std::string& skipped);

/// "all 64", or "8 (indices 0, 7, ...)" up to a dozen listed: what a check did not read is then
/// visible (a crash at another index needs --samples all or --index).
std::string indices_text(const std::vector<uint64_t>& indices, uint64_t size);

}  // namespace tp::detail
