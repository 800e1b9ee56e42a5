// `host plugins check FILE.so`: exercises every component of a loaded library the way a run
// would, so a plugin author finds contract violations before a user does. Datasets are read on
// both splits at their first, last and some random indices (and any the caller names), twice
// each, and must give the same fields every time; models run forward and backward.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/field_contracts.h"
#include "tp/framework/data/named_tensors.h"
#include "tp/framework/plugin/plugin_library.h"

namespace tp {

/// One line of the report.
struct CheckLine {
  std::string component;
  bool ok;
  std::string what;
  bool skipped = false; ///< not created: a required key has no value (ok is false too)
  bool warning = false; ///< worth a look, not a failure (ok is true): a float class label, an unchecked test split
};

/// What the components are created with and which samples are read.
/// CheckOptions::samples for "every sample" (`host plugins check --samples all`).
inline constexpr uint64_t kAllSamples = UINT64_MAX;

/// `--samples`' value: "" -> 0 (the default), "all" -> kAllSamples, N >= 1 -> N. Throws
/// ConfigError on --samples otherwise.
uint64_t parse_sample_count(const std::string& text);

struct CheckOptions {
  /// Options by component id, as a run's table gives them (`host plugins check --config`); a
  /// dataset's entry is its "train" split. A component without one is created with its defaults.
  std::map<std::string, ComponentConfig> configs;
  /// A dataset's "val" split options; without one, the "val" split gets `configs`' entry (as
  /// data.val_from_train does in a run).
  std::map<std::string, ComponentConfig> val_configs;
  /// A dataset's "test" split options (a run's [data.test]); without one, `configs`' entry (as
  /// data.test_from_train does).
  std::map<std::string, ComponentConfig> test_configs;
  std::vector<uint64_t> indices; ///< sample indices read besides the first, last and random ones
  uint64_t epoch = 0;            ///< the epoch samples are read in (set_epoch and ctx.epoch)
  /// How many samples of a split to read: 0 = the default (first, last and kRandomIndices spread
  /// by a fixed hash), N = N spread evenly (first and last included), kAllSamples = every one.
  uint64_t samples = 0;
  uint64_t seed = 0;             ///< run.seed, from which each sample's ctx.seed derives
  /// The run config the options come from (`--config`): a relative path key without a recorded
  /// origin resolves beside it, and messages name it. Empty: none (the working directory).
  std::string source_file;
  /// The run's loss (`--config`) and what it declares of its target fields (plugin ABI 1.9):
  /// every sample a dataset gives is held to these contracts. Empty: nothing to hold them to.
  std::string contract_loss;
  std::vector<FieldContract> contracts;
  /// The run's model (`--config`) and a batch of the run's first training samples: that model
  /// is run on them where it declares no example inputs or they do not fit its options (an
  /// image_size the examples do not have). Empty: the declared examples only.
  std::string run_model;
  NamedTensors run_inputs;
  std::string run_inputs_error; ///< why `run_inputs` is empty although `run_model` is set
  /// Called with each line as soon as it is known, before the next component runs: a crash in a
  /// later component ends the process, and the lines before it must already be out.
  std::function<void(const CheckLine&)> report;
};

/// Checks each component of `library`: the options validate against its schema (a component
/// whose required key has no value is skipped, not failed); create/use/destroy work; destroy(NULL)
/// is safe (PLG-12). Datasets: create("train"), create("val") and, when the dataset serves one,
/// create("test"); each sample read twice equals
/// itself; every sample has the same field names, dtypes and shapes; every field has a DLPack
/// deleter (PLG-9); an index past the end is refused; a floating scalar field named like a class
/// label ("label", "target", "y", ...) is a warning line; with `contracts`, a sample that breaks
/// one fails the split (boxes as x, y, w, h where the loss takes x1, y1, x2, y2); a sample the
/// plugin refuses to read (a bad file) fails the dataset's line, but the reading goes on, so the
/// line lists every refused sample of every split with the plugin's message, then their count. Models: forward + backward on a dummy batch
/// from their declared examples (the run's model: its first training samples where those do not
/// fit, `run_inputs`) gives every trainable parameter a gradient. Metrics expose state;
/// callbacks accept an event. A plugin fault becomes a failed line naming the call, split and
/// sample index; a crash is reported by the crash handler when installed (plugin/plugin_crash.h).
/// Throws ConfigError for options that do not validate (the caller's, not the plugin's, fault).
std::vector<CheckLine> check_library(const std::shared_ptr<PluginLibrary>& library, const CheckOptions& options = {});

}  // namespace tp
