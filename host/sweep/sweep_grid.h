// `host sweep --grid KEY=V1,V2,...`: the axes of a sweep and the cells of their product, each
// cell a list of `--set` overrides and a directory name made of its values.
//
// An axis is one key and its values ("amp.precision=fp32,bf16,fp16"), or several keys changed
// together, each value a TOML array with one element per key
// ("train.batch_size+train.grad_accum_steps=[64,1],[16,4]": micro-batch 16 x 4 trains with the
// same effective batch as 64 x 1). Values are TOML value literals, read as `--set` reads them
// (text that is not one is a string), split at the commas outside brackets and quotes.
#pragma once

#include <string>
#include <vector>

namespace tp::cli {

/// One point of the grid.
struct SweepCell {
  /// "amp.precision=bf16,train.grad_accum_steps=4": the values in axis order, made safe as a
  /// directory name (characters outside [A-Za-z0-9._+=,-] become '_', quotes and spaces are
  /// dropped; a name over 200 characters is cut and ends in a hash of the whole).
  std::string name;
  std::vector<std::string> overrides; ///< "amp.precision=bf16", ... as `--set` arguments
};

/// The cells of the product of the `--grid` arguments, the first axis varying slowest (so
/// `--grid a=1,2 --grid b=x,y` gives a=1,b=x; a=1,b=y; a=2,b=x; a=2,b=y).
/// Throws tp::ConfigError naming the --grid argument for: no '=', an empty key or value, a key
/// given twice (in one axis or two), a value of a multi-key axis that is not an array with one
/// element per key, or two values whose directory names coincide.
std::vector<SweepCell> expand_grid(const std::vector<std::string>& grid);

/// Whether two cells' overrides ("key=value", as SweepCell::overrides) set the same keys to the
/// same values, compared as the TOML values `--set` reads, in any order: `optim.lr=1e-2` and
/// `optim.lr=0.01` are one setting, so a sweep run again with the other spelling finds the cell
/// trained under the first (experiments trial F3).
bool same_settings(const std::vector<std::string>& a, const std::vector<std::string>& b);

}  // namespace tp::cli
