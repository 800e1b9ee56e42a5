// A comparison's runs grouped over their seeds (`host compare`, `host sweep --grid run.seed=1,2,3`,
// docs/experiments.md): the runs that share every differing setting but run.seed form one group,
// with the mean and standard deviation of the compared metric, so that settings are ranked by
// their mean over seeds rather than by one lucky seed (experiments trial F4).
#pragma once

#include <string>
#include <vector>

#include "tp/framework/report/comparison.h"

namespace tp {

/// One setting: the runs of a comparison that differ only in run.seed.
struct SeedGroup {
  std::vector<FlatValue> config;  ///< the value of each SeedGroups::keys entry
  std::vector<std::string> seeds; ///< its runs' run.seed values, in the comparison's order
  double final_mean = 0.0;        ///< over the runs' finite final values (NaN when none)
  double final_std = 0.0;         ///< their sample standard deviation (n − 1; NaN below two values)
  double best_mean = 0.0;         ///< likewise for the best values
  double best_std = 0.0;
  int finite_final = 0;           ///< runs whose final value is finite (a diverged seed is not)
};

/// The groups of a comparison, in the order of their first run.
struct SeedGroups {
  std::string metric;            ///< the compared metric
  std::vector<std::string> keys; ///< the comparison's differing keys but run.seed
  std::vector<SeedGroup> groups;
};

/// Groups `comparison`'s rows by the values of its differing keys other than run.seed. Empty
/// groups when run.seed is not a differing key or no group holds two runs (nothing to average).
SeedGroups group_over_seeds(const Comparison& comparison);

/// The groups as CSV: the keys, seeds (their count), seed_values (space-separated), "final
/// <metric> mean", "final <metric> std", "best <metric> mean", "best <metric> std", finite_final;
/// numbers in full precision, empty where missing.
std::string seed_groups_csv(const SeedGroups& groups);

/// The same as a GitHub Markdown table, "mean ± std" per metric column, rounded for reading.
std::string seed_groups_markdown(const SeedGroups& groups);

}  // namespace tp
