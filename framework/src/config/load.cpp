#include "tp/framework/config/load.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <system_error>

#include "tp/framework/config/host_keys.h"
#include "tp/framework/config/host_table.h"
#include "tp/framework/config/monitor_mode.h"
#include "tp/framework/config/install_layout.h"
#include "tp/framework/config/overrides.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

std::vector<ParamGroupRule> param_group_rules(const toml::table& root) {
  std::vector<ParamGroupRule> rules;
  if (const toml::array* groups = root.at_path("optim.param_groups").as_array()) {
    for (const toml::node& node : *groups) {
      const toml::table& group = *node.as_table(); // shape checked by validate_host_table
      rules.push_back({group["pattern"].value<std::string>().value_or(""), group["lr"].value<double>(),
                       group["weight_decay"].value<double>(), group["freeze"].value<bool>().value_or(false),
                       group["unfreeze_at_epoch"].value<int64_t>().value_or(0),
                       group["freeze_bn_stats"].value<bool>().value_or(false)});
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

/// The array of tables `name` of `parent`; `prefix` ("data.") makes the key paths full.
std::vector<ComponentConfig> take_components(toml::table& parent, const std::string& name,
                                             const std::string& prefix = "") {
  std::vector<ComponentConfig> components;
  if (toml::array* array = parent.get_as<toml::array>(name)) {
    for (std::size_t i = 0; i < array->size(); ++i) {
      components.push_back(take_component(*array->get_as<toml::table>(i),
                                          prefix + name + "[" + std::to_string(i) + "]"));
    }
  }
  return components;
}

/// Where a value came from, for a message that must not echo it: node_origin() of a --set or an
/// environment value is the argument itself, which would show the password being refused.
std::string origin_without_value(const toml::node& node, std::string_view source_name, std::string_view key) {
  const std::string origin = node_origin(node, source_name);
  if (origin.starts_with(kSetOriginPrefix)) return "--set " + std::string(key);
  if (origin.starts_with(kEnvOriginPrefix)) return origin.substr(0, origin.find('='));
  return origin + ": " + std::string(key);
}

/// A tracking URI whose user-info reads more than one way is refused here, before config.toml,
/// runtime.toml or a log exists: the writers' redaction and the client's credentials would not
/// agree, and the password would be written in clear (security trial F4). The environment's
/// MLFLOW_TRACKING_URI, used when the key is "", is checked with it.
void check_tracking_uri(const toml::table& root, const std::map<std::string, std::string>& env,
                        std::string_view source_name) {
  const std::string key = "logging.mlflow.tracking_uri";
  const toml::node* node = root.at_path(key).node();
  const std::string uri = node == nullptr ? "" : node->value_or(std::string());
  if (!uri.empty()) {
    if (std::string problem = unreadable_user_info(origin_without_value(*node, source_name, key), uri);
        !problem.empty())
      throw ConfigError(key, problem);
    return;
  }
  const auto found = env.find("MLFLOW_TRACKING_URI");
  if (found == env.end() || !root.at_path("logging.mlflow.enabled").value_or(false)) return;
  if (std::string problem = unreadable_user_info("environment variable MLFLOW_TRACKING_URI", found->second);
      !problem.empty())
    throw ConfigError("MLFLOW_TRACKING_URI", problem);
}

RunConfig build_run_config(toml::table root, std::string_view source_name,
                           const std::vector<std::string>& overrides,
                           const std::map<std::string, std::string>& env, ConfigScope scope) {
  // 1. Merge: file < environment < --set.
  apply_environment(root, env);
  apply_overrides(root, overrides);
  // 2. Check host keys and component table shapes, then add defaults.
  validate_host_table(root, source_name, scope == ConfigScope::kData);
  check_tracking_uri(root, env, source_name);
  // Before the defaults fill it in: whether the user gave optim.lr (refused beside optim.lr_base).
  const toml::node* given_lr = root.at_path("optim.lr").node();
  const std::string given_lr_origin = given_lr != nullptr ? node_origin(*given_lr, source_name) : "";
  complete_host_table(root);
  resolve_monitor_modes(root); // "auto" becomes the direction used, in config.toml too
  // A file named in a config file (train.init_weights) is found beside it, as plugin dirs and
  // TP_CFG_PATH keys are.
  for (const HostKey& key : host_keys()) {
    if (!key.spec.is_path) continue;
    const std::size_t dot = key.spec.path.find('.');
    toml::table& section = *root.get_as<toml::table>(key.spec.path.substr(0, dot)); // completed above
    const std::string leaf = key.spec.path.substr(dot + 1);
    section.insert_or_assign(leaf, resolve_config_path(*section.get(leaf), source_name));
  }

  // 3. Typed view, one member per host key. `resolved` is copied before the component tables are
  // moved out of `root`.
  RunConfig cfg{};
  cfg.resolved = root;
  read_host_keys(root, cfg);
  // optim.lr_base sets optim.lr from the global batch once the ranks are known (lr_base.h); a
  // given lr beside it would be one of two answers. config.toml keeps lr_base alone, so the same
  // file on another number of ranks scales again.
  if (cfg.optim.lr_base > 0) {
    if (!given_lr_origin.empty())
      throw ConfigError("optim.lr", given_lr_origin + ": optim.lr and optim.lr_base are both set. lr_base (timm's "
                                                      "--lr-base) gives the lr for a global batch of optim.lr_base_size "
                                                      "and the host scales it to this run's; leave optim.lr out, or set "
                                                      "optim.lr_base = 0 to train at optim.lr as given.");
    cfg.resolved.at_path("optim").as_table()->erase("lr");
  }
  cfg.optim.param_groups = param_group_rules(root);

  // 4. Component tables.
  toml::table& data = *root.get_as<toml::table>("data");
  cfg.data.train = take_component(*data.get_as<toml::table>("train"), "data.train");
  if (toml::table* val = data.get_as<toml::table>("val")) {
    cfg.data.val = take_component(*val, "data.val");
  }
  if (toml::table* test = data.get_as<toml::table>("test")) cfg.data.test = take_component(*test, "data.test");
  cfg.data.batch_transforms = take_components(data, "batch_transforms", "data.");
  // [model] and [loss] are absent only under ConfigScope::kData (validate_host_table requires them
  // otherwise): then their component ids stay empty.
  cfg.model.key_path = "model";
  cfg.loss.key_path = "loss";
  if (toml::table* model = root.get_as<toml::table>("model")) cfg.model = take_component(*model, "model");
  // A host key inside the component table (validated by validate_host_table): the host drives
  // the recomputation, the plugin only declares its blocks.
  cfg.activation_checkpointing = cfg.model.options[kActivationCheckpointingKey].value<bool>().value_or(false);
  cfg.model.options.erase(kActivationCheckpointingKey);
  cfg.freeze_bn_stats = cfg.model.options[kFreezeBnStatsKey].value<bool>().value_or(false);
  cfg.model.options.erase(kFreezeBnStatsKey);
  if (toml::table* loss = root.get_as<toml::table>("loss")) cfg.loss = take_component(*loss, "loss");
  cfg.metrics = take_components(root, "metrics");
  cfg.callbacks = take_components(root, "callbacks");
  return cfg;
}

}  // namespace

RunConfig load_run_config_from_string(std::string_view toml_text, std::string_view source_name,
                                      const std::vector<std::string>& overrides,
                                      const std::map<std::string, std::string>& env, ConfigScope scope) {
  toml::table root;
  try {
    root = parse_toml(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    const std::string name = source_name.empty() ? "config" : std::string(source_name);
    throw ConfigError("", name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                              ": TOML syntax error: " + std::string(e.description()) +
                              ". Fix the file at that position (strings need quotes, tables "
                              "are written [name], arrays [a, b]).");
  }
  return build_run_config(std::move(root), source_name, overrides, env, scope);
}

RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides,
                          const std::map<std::string, std::string>& env, ConfigScope scope) {
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
                              where + ". Pass an existing TOML file with --config; " +
                              reference_config() + " lists every key.");
  }
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.is_open() || in.bad()) {
    throw ConfigError("", "config file '" + file.string() + "' could not be read. Check its "
                                                           "permissions.");
  }
  RunConfig cfg = load_run_config_from_string(text, file.string(), overrides, env, scope);
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
