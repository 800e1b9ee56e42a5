// Shard patterns as webdataset writes them (the `braceexpand` Python package it uses):
// `data/train-{000000..000127}.tar` is 128 names, each number zero-padded to the width written;
// `data/{train,extra}-{0..9}.tar` is 20 (lists, several braces, nesting). Expansion is a pure
// function of the pattern; the files are looked at later (shard_set.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tp::webdataset {

/// The most names a pattern may expand to: a typo such as {0..99999999} is refused before a
/// single name is made (about 100 TB of 1 GB shards is far beyond any one dataset).
inline constexpr std::size_t kMaxShards = 100000;

/// How deeply braces may nest (`{a,{b,{c,...}}}`): parsing and expanding recurse once per level.
inline constexpr int kMaxBraceNesting = 64;

/// The names `pattern` expands to, in braceexpand's order (the first brace varies slowest):
/// - `{a,b,c}`: each comma-separated alternative, itself a pattern (nesting allowed, `{}` items
///   may be empty);
/// - `{lo..hi}` and `{lo..hi..step}` with decimal integers: every number from lo to hi (down
///   when hi < lo) by step (> 0), zero-padded to the longer of lo and hi when either is written
///   with a leading zero (`{000000..000127}` keeps 6 digits; `{8..10}` gives 8, 9, 10);
/// - any other brace group (`{x}`, `{a..e}`) is kept as written, as braceexpand keeps it;
/// - `\` makes the next character literal (`\{`).
/// Throws tp::cpp::Failure(TP_ERR_CONFIG) "webdataset: <key> = '<pattern>': ..." when the pattern
/// is empty, a brace is unbalanced or nested deeper than kMaxBraceNesting, a range's numbers are
/// too long (more than 18 digits) or its step 0, a name is empty, or it expands to more than
/// kMaxShards names (counted before any is made).
std::vector<std::string> expand_shard_pattern(const std::string& pattern, const char* key);

}  // namespace tp::webdataset
