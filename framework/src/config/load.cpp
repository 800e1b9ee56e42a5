#include "tp/framework/config/load.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <system_error>

#include "tp/framework/config/host_table.h"
#include "tp/framework/config/overrides.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

// Only called after validate_host_table() and complete_host_table(), so every host key exists with
// its declared type; value_or() never supplies its fallback.
std::string get_string(const toml::table& root, std::string_view path) {
  return root.at_path(path).value<std::string>().value_or("");
}
int64_t get_int(const toml::table& root, std::string_view path) {
  return root.at_path(path).value<int64_t>().value_or(0);
}
double get_float(const toml::table& root, std::string_view path) {
  return root.at_path(path).value<double>().value_or(0.0);
}
bool get_bool(const toml::table& root, std::string_view path) {
  return root.at_path(path).value<bool>().value_or(false);
}
template <typename T>
std::vector<T> get_array(const toml::table& root, std::string_view path) {
  std::vector<T> values;
  if (const toml::array* array = root.at_path(path).as_array()) {
    for (const toml::node& element : *array) values.push_back(element.value<T>().value_or(T{}));
  }
  return values;
}

std::vector<ParamGroupRule> param_group_rules(const toml::table& root) {
  std::vector<ParamGroupRule> rules;
  if (const toml::array* groups = root.at_path("optim.param_groups").as_array()) {
    for (const toml::node& node : *groups) {
      const toml::table& group = *node.as_table(); // shape checked by validate_host_table
      rules.push_back({group["pattern"].value<std::string>().value_or(""), group["lr"].value<double>(),
                       group["weight_decay"].value<double>()});
    }
  }
  return rules;
}

/// Moves `table` out of the run table (keeping its nodes' source positions for
/// validate_component) and splits off the `component` id.
ComponentConfig take_component(toml::table& table, std::string key_path) {
  ComponentConfig component;
  component.component = table[kComponentKey].value<std::string>().value_or("");
  component.key_path = std::move(key_path);
  component.options = std::move(table);
  component.options.erase(kComponentKey);
  return component;
}

std::vector<ComponentConfig> take_components(toml::table& root, const std::string& name) {
  std::vector<ComponentConfig> components;
  if (toml::array* array = root.get_as<toml::array>(name)) {
    for (std::size_t i = 0; i < array->size(); ++i) {
      components.push_back(take_component(*array->get_as<toml::table>(i),
                                          name + "[" + std::to_string(i) + "]"));
    }
  }
  return components;
}

RunConfig build_run_config(toml::table root, std::string_view source_name,
                           const std::vector<std::string>& overrides,
                           const std::map<std::string, std::string>& env) {
  // 1. Merge: file < environment < --set.
  apply_environment(root, env);
  apply_overrides(root, overrides);
  // 2. Check host keys and component table shapes, then add defaults.
  validate_host_table(root, source_name);
  complete_host_table(root);
  // A weights file named in a config file is found beside it, as plugin dirs and TP_CFG_PATH keys are.
  if (toml::table* train = root.get_as<toml::table>("train"); train != nullptr && train->contains("init_weights"))
    train->insert_or_assign("init_weights", resolve_config_path(*train->get("init_weights"), source_name));

  // 3. Typed view. `resolved` is copied before the component tables are moved out of `root`.
  RunConfig cfg{};
  cfg.resolved = root;
  cfg.run = {get_string(root, "run.name"), get_string(root, "run.output_dir"),
             get_int(root, "run.seed"), get_string(root, "run.device"),
             get_bool(root, "run.deterministic"), get_int(root, "run.threads"),
             get_bool(root, "run.channels_last"), get_bool(root, "run.cudnn_benchmark"),
             get_bool(root, "run.tf32")};
  cfg.train = {get_int(root, "train.epochs"), get_int(root, "train.batch_size"),
               get_int(root, "train.log_every_steps"), get_bool(root, "train.drop_last"),
               get_int(root, "train.grad_accum_steps"), get_float(root, "train.max_grad_norm"),
               get_float(root, "train.grad_norm_type"), get_float(root, "train.clip_value"),
               get_string(root, "train.nan_policy"), get_int(root, "train.overfit_batches"),
               get_bool(root, "train.fast_dev_run"), get_string(root, "train.init_weights")};
  cfg.amp = {get_string(root, "amp.precision"), get_float(root, "amp.init_scale"),
             get_float(root, "amp.growth_factor"), get_float(root, "amp.backoff_factor"),
             get_int(root, "amp.growth_interval")};
  cfg.schedule = {get_string(root, "schedule.name"), get_int(root, "schedule.warmup_steps"),
                  get_float(root, "schedule.warmup_start_factor"), get_float(root, "schedule.min_lr"),
                  get_float(root, "schedule.max_lr"), get_float(root, "schedule.pct_start"),
                  get_string(root, "schedule.anneal_strategy"), get_bool(root, "schedule.three_phase"),
                  get_float(root, "schedule.div_factor"), get_float(root, "schedule.final_div_factor"),
                  get_bool(root, "schedule.cycle_momentum"), get_float(root, "schedule.base_momentum"),
                  get_float(root, "schedule.max_momentum"), get_int(root, "schedule.step_size"),
                  get_float(root, "schedule.gamma"), get_array<int64_t>(root, "schedule.milestones"),
                  get_string(root, "schedule.mode"), get_float(root, "schedule.factor"),
                  get_int(root, "schedule.patience"), get_float(root, "schedule.threshold"),
                  get_string(root, "schedule.threshold_mode"), get_int(root, "schedule.cooldown"),
                  get_float(root, "schedule.eps"), get_string(root, "schedule.monitor")};
  cfg.eval = {get_int(root, "eval.batch_size"), get_string(root, "eval.strategy"), get_int(root, "eval.every")};
  cfg.optim = {get_string(root, "optim.name"),     get_float(root, "optim.lr"),
               get_float(root, "optim.weight_decay"), get_float(root, "optim.momentum"),
               get_bool(root, "optim.nesterov"),   get_array<double>(root, "optim.betas"),
               get_float(root, "optim.eps"),       get_bool(root, "optim.amsgrad"),
               get_float(root, "optim.alpha"),     get_bool(root, "optim.centered"),
               get_string(root, "optim.implementation"), param_group_rules(root)};
  cfg.data.num_workers = get_int(root, "data.num_workers");
  cfg.data.prefetch = get_int(root, "data.prefetch");
  cfg.data.shuffle = get_bool(root, "data.shuffle");
  cfg.data.val_from_train = get_bool(root, "data.val_from_train");
  cfg.data.on_bad_sample = get_string(root, "data.on_bad_sample");
  cfg.checkpoint = {get_string(root, "checkpoint.strategy"),   get_int(root, "checkpoint.every"),
                    get_bool(root, "checkpoint.save_last"),     get_int(root, "checkpoint.keep_last"),
                    get_int(root, "checkpoint.save_top_k"),     get_bool(root, "checkpoint.load_best_at_end"),
                    get_string(root, "checkpoint.monitor"),     get_string(root, "checkpoint.mode")};
  cfg.early_stopping = {get_int(root, "early_stopping.patience"), get_string(root, "early_stopping.monitor"),
                        get_string(root, "early_stopping.mode"), get_float(root, "early_stopping.min_delta"),
                        get_bool(root, "early_stopping.check_finite")};
  cfg.plots = {get_bool(root, "plots.enabled")};
  cfg.progress = {get_string(root, "progress.mode"), get_float(root, "progress.every_seconds")};
  cfg.plugin_dirs = get_array<std::string>(root, "plugins.dirs");
  cfg.dist = {get_string(root, "dist.backend"), get_float(root, "dist.timeout_s"), get_float(root, "dist.bucket_mb"),
              get_bool(root, "dist.find_unused_parameters"), get_bool(root, "dist.broadcast_buffers"),
              get_bool(root, "dist.overlap")};

  // 4. Component tables.
  toml::table& data = *root.get_as<toml::table>("data");
  cfg.data.train = take_component(*data.get_as<toml::table>("train"), "data.train");
  if (toml::table* val = data.get_as<toml::table>("val")) {
    cfg.data.val = take_component(*val, "data.val");
  }
  cfg.model = take_component(*root.get_as<toml::table>("model"), "model");
  // A host key inside the component table (validated by validate_host_table): the host drives
  // the recomputation, the plugin only declares its blocks.
  cfg.activation_checkpointing = cfg.model.options[kActivationCheckpointingKey].value<bool>().value_or(false);
  cfg.model.options.erase(kActivationCheckpointingKey);
  cfg.loss = take_component(*root.get_as<toml::table>("loss"), "loss");
  cfg.metrics = take_components(root, "metrics");
  cfg.callbacks = take_components(root, "callbacks");
  return cfg;
}

}  // namespace

RunConfig load_run_config_from_string(std::string_view toml_text, std::string_view source_name,
                                      const std::vector<std::string>& overrides,
                                      const std::map<std::string, std::string>& env) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    const std::string name = source_name.empty() ? "config" : std::string(source_name);
    throw ConfigError("", name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                              ": TOML syntax error: " + std::string(e.description()) +
                              ". Fix the file at that position (strings need quotes, tables "
                              "are written [name], arrays [a, b]).");
  }
  return build_run_config(std::move(root), source_name, overrides, env);
}

RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides,
                          const std::map<std::string, std::string>& env) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    const std::string where =
        file.is_relative()
            ? " (relative to the working directory " +
                  std::filesystem::current_path(error).string() + ")"
            : "";
    throw ConfigError("", "config file '" + file.string() + "' " +
                              (std::filesystem::exists(file, error) ? "is not a regular file"
                                                                    : "does not exist") +
                              where + ". Pass an existing TOML file with --config; "
                              "configs/reference.toml lists every key.");
  }
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.is_open() || in.bad()) {
    throw ConfigError("", "config file '" + file.string() + "' could not be read. Check its "
                                                           "permissions.");
  }
  RunConfig cfg = load_run_config_from_string(text, file.string(), overrides, env);
  cfg.source = file.string();
  return cfg;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

}  // namespace tp
