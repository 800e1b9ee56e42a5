#include <algorithm>
#include <cstdio>
#include <optional>

#include "commands.h"
#include "session.h"
#include "training_batch.h"
#include "tp/framework/config/load.h"
#include "tp/framework/config/overrides.h"
#include "tp/framework/config/validate.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/plugin_check.h"
#include "tp/framework/plugin/loss_proxy.h"
#include "tp/framework/plugin/plugin_crash.h"

namespace tp::cli {
namespace {

const char* type_name(const KeySpec& key) {
  if (key.is_path) return "path";
  switch (key.type) {
    case ValueType::Bool: return "bool";
    case ValueType::Int: return "int";
    case ValueType::Float: return "float";
    case ValueType::String: return "string";
    case ValueType::IntArray: return "int[]";
    case ValueType::FloatArray: return "float[]";
    case ValueType::StringArray: return "string[]";
  }
  return "?";
}

void print_component(const ComponentInfo& info, const PluginLibrary& library, bool verbose) {
  std::printf("  %-34s %-8s %-7s tier %s  %s\n", info.id.c_str(), kind_name(info.kind), info.version.c_str(),
              info.tier == TP_TIER_S ? "S" : "T", info.description.c_str());
  if (!verbose) return;
  std::printf("      from %s (plugin '%s', ABI %u.%u)\n", library.path().c_str(), library.name().c_str(),
              library.abi().major, library.abi().minor);
  for (const KeySpec& key : info.schema)
    std::printf("      %-22s %-9s = %-14s %s\n", key.path.c_str(), type_name(key),
                key.default_literal.empty() ? "(required)" : key.default_literal.c_str(), key.help.c_str());
}

// `--config FILE`: each component takes the options of the first table of the run that names
// it (data.train, data.val, data.test, model, loss, data.batch_transforms, metrics, callbacks); a
// dataset's "val" split those of data.val when that names it, its "test" split those of
// data.test. --set then works on the file, as for `host train`. The path keys of `library`'s
// components are made absolute in `run`'s own tables first (a relative value beside the config
// file, a --set one from the working directory): the copies in `check` no longer know where their
// values were written.
void configs_from_run(RunConfig& run, const PluginLibrary& library, CheckOptions& check) {
  std::vector<ComponentConfig*> tables{&run.data.train};
  if (run.data.val) tables.push_back(&*run.data.val);
  if (run.data.test) tables.push_back(&*run.data.test);
  tables.push_back(&run.model);
  tables.push_back(&run.loss);
  for (auto* list : {&run.data.batch_transforms, &run.metrics, &run.callbacks})
    for (ComponentConfig& table : *list) tables.push_back(&table);
  for (ComponentConfig* table : tables)
    for (const ComponentInfo& info : library.components())
      if (info.id == table->component) resolve_path_keys(*table, info.schema, run.source);
  for (const ComponentConfig* table : tables) check.configs.emplace(table->component, *table);
  if (run.data.val) check.val_configs.emplace(run.data.val->component, *run.data.val);
  if (run.data.test) check.test_configs.emplace(run.data.test->component, *run.data.test);
  check.seed = static_cast<uint64_t>(run.run.seed);
  check.source_file = run.source;
}

// What the run's loss `entry` declares of its target fields (plugin ABI 1.9), into `check`: the
// loss is created with the run's [loss] table (its path keys resolved in place, as above) and
// destroyed at once.
void contracts_of(const ComponentEntry& entry, RunConfig& run, CheckOptions& check) {
  resolve_path_keys(run.loss, entry.info->schema, run.source);
  ComponentConfig table = run.loss;
  validate_component(table, entry.info->schema, run.source);
  const LossProxy loss(entry, table);
  check.contract_loss = loss.id();
  check.contracts = loss.description().contracts;
}

// The run's first training samples, read by the run's training dataset in `registry`, for the
// run's model to be checked on where its example inputs do not fit (plugin_check.h's run_inputs);
// a failure to read them is kept as the reason. False when no library there has the dataset.
bool run_inputs_from(const Registry& registry, RunConfig& run, CheckOptions& check) {
  for (const ComponentEntry& entry : registry.all()) {
    if (entry.info->id != run.data.train.component || entry.info->kind != TP_KIND_DATASET) continue;
    check.run_model = run.model.component;
    try {
      resolve_path_keys(run.data.train, entry.info->schema, run.source);
      RunConfig validated = run;
      validate_component(validated.data.train, entry.info->schema, run.source);
      check.run_inputs = first_training_batch(validated, registry, 2, "host plugins check");
    } catch (const std::exception& e) {
      check.run_inputs_error = e.what();
    }
    return true;
  }
  return false;
}

// What the run contributes from the plugin search path: its loss's contracts and its first
// training samples, in a registry of its own that is gone (its libraries unloaded) before the
// checked library loads: a library two registries hold would be initialised twice. Each flag is
// false when no library there has the component (the checked one may).
struct FromSearchPath {
  bool contracts = false;
  bool run_inputs = false;
};

FromSearchPath from_search_path(const Options& options, RunConfig& run, const HostServices& host, CheckOptions& check) {
  Registry side(host);
  side.allow_insecure_plugin_dirs(options.allow_insecure_plugin_dir);
  side.load_search_path(search_path(options, config_plugin_dirs(run, options.config)));
  FromSearchPath found;
  for (const ComponentEntry& entry : side.all())
    if (entry.info->id == run.loss.component && entry.info->kind == TP_KIND_LOSS) {
      contracts_of(entry, run, check);
      found.contracts = true;
      break;
    }
  found.run_inputs = run_inputs_from(side, run, check);
  return found;
}

// No --config: `--set KEY=VALUE` is an option of every component of the library that declares
// KEY (`--set size=8`); a key none declares is a usage error.
void configs_from_sets(const Options& options, const PluginLibrary& library, CheckOptions& check) {
  for (const std::string& text : options.sets) {
    const Override set = parse_override(text);
    const std::string origin = std::string(kSetOriginPrefix) + text;
    bool used = false;
    for (const ComponentInfo& info : library.components()) {
      const bool declared = std::any_of(info.schema.begin(), info.schema.end(),
                                        [&](const KeySpec& key) { return key.path == set.key_path; });
      if (!declared) continue;
      auto& options_of = check.configs.try_emplace(info.id, ComponentConfig{info.id, "check", {}}).first->second.options;
      // As for a run's --set: text that is not one TOML value is taken as a string.
      if (!parse_value_into(options_of, set.key_path, set.value_text, origin))
        options_of.insert_or_assign(set.key_path, set.value_text);
      used = true;
    }
    if (!used)
      throw ConfigError(set.key_path, origin + ": no component of " + options.file + " declares the key '" +
                                          set.key_path + "' (`host plugins list --verbose` shows each schema; "
                                          "with --config FILE, --set takes a run's key path such as data.train.size).");
  }
}

int check_plugin_file(const Options& options) {
  Logger logger;
  HostServices host(logger, ProcessPlace{});
  CheckOptions check;
  check.indices = options.indices;
  check.epoch = options.epoch;
  check.samples = parse_sample_count(options.samples);
  // A crash in plugin code names the component, the call, the split and the sample, exit 5.
  install_plugin_crash_handler(nullptr);
  std::optional<RunConfig> run;
  FromSearchPath found;
  if (!options.config.empty()) {
    run = load_run_config(options.config, options.sets, process_environment());
    found = from_search_path(options, *run, host, check);
  }
  Registry registry(host);
  registry.allow_insecure_plugin_dirs(options.allow_insecure_plugin_dir);
  auto library = registry.load_file(options.file);
  if (run && !found.contracts)
    for (const ComponentInfo& info : library->components())
      if (info.id == run->loss.component && info.kind == TP_KIND_LOSS) contracts_of({&info, library}, *run, check);
  if (run && !found.run_inputs) run_inputs_from(registry, *run, check);
  if (run) configs_from_run(*run, *library, check);
  else configs_from_sets(options, *library, check);
  std::printf("%s: plugin '%s', ABI %u.%u, %zu component(s)\n", options.file.c_str(), library->name().c_str(),
              library->abi().major, library->abi().minor, library->components().size());
  std::fflush(stdout);
  check.report = [](const CheckLine& line) {
    const char* mark = line.warning ? "warn" : line.ok ? "ok" : line.skipped ? "skip" : "FAIL";
    std::printf("  [%s] %s: %s\n", mark, line.component.c_str(), line.what.c_str());
    std::fflush(stdout); // before the next component runs: it may crash the process
  };
  int failed = 0, skipped = 0, warnings = 0;
  for (const CheckLine& line : check_library(library, check)) {
    failed += !line.ok && !line.skipped ? 1 : 0;
    skipped += line.skipped ? 1 : 0;
    warnings += line.warning ? 1 : 0;
  }
  const std::size_t checked = library->components().size() - static_cast<std::size_t>(skipped);
  // Warnings leave the exit code 0: they may be intended (a float regression target named "y").
  std::printf("%zu checked, %d failed, %d not created for want of options%s\n", checked, failed, skipped,
              warnings > 0 ? (", " + std::to_string(warnings) + " warning(s)").c_str() : "");
  return failed > 0 ? kExitRuntime : kExitOk;
}

}  // namespace

int run_plugins(const Options& options) {
  if (options.action == "check") return check_plugin_file(options);
  auto session = open_session(options);
  std::printf("plugin search path (highest precedence first):\n");
  const char* env_path = std::getenv("TORCHHOST_PLUGIN_PATH");
  for (const PluginDir& dir : plugin_search_path(options.plugin_dirs, session->config.plugin_dirs,
                                                 env_path != nullptr ? env_path : "", builtin_plugin_dir()))
    std::printf("  %-24s %s\n", dir.origin.c_str(), dir.path.c_str());
  std::printf("components:\n");
  for (const ComponentEntry& entry : session->registry.all()) print_component(*entry.info, *entry.library, options.verbose);
  const auto& unusable = session->registry.unusable();
  if (unusable.empty()) return kExitOk;
  std::printf("files that do not load (every run with this search path refuses to start until each is fixed or moved "
              "out of its directory):\n");
  for (const Registry::UnusableFile& bad : unusable)
    std::printf("  %s\n      %s\n", bad.file.c_str(), bad.reason.c_str());
  return kExitPlugin;
}

}  // namespace tp::cli
