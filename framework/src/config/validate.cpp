#include "tp/framework/config/validate.h"

#include "tp/framework/config/closest_key.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

std::string label_of(const ComponentConfig& component) {
  return "[" + component.key_path + "] (" + component.component + ")";
}

std::string key_names(const std::vector<KeySpec>& schema) {
  std::string names;
  for (const KeySpec& spec : schema) names += (names.empty() ? "" : ", ") + spec.path;
  return names.empty() ? "no keys" : names;
}

const KeySpec* find_key(const std::vector<KeySpec>& schema, std::string_view name) {
  for (const KeySpec& spec : schema) {
    if (spec.path == name) return &spec;
  }
  return nullptr;
}

}  // namespace

void validate_component(ComponentConfig& component, const std::vector<KeySpec>& schema,
                        std::string_view source_file) {
  const std::string label = label_of(component);
  std::vector<std::string> names;
  names.reserve(schema.size());
  for (const KeySpec& spec : schema) names.push_back(spec.path);

  // 1. Every key the user wrote is declared, with the declared type and an allowed choice.
  std::vector<std::pair<std::string, std::string>> resolved_paths;
  for (const auto& [key, node] : component.options) {
    const std::string name(key.str());
    if (name == kComponentKey) continue;
    const std::string path = component.key_path + "." + name;
    const std::string where = node_origin(node, source_file) + ": " + label + ": ";
    const KeySpec* spec = find_key(schema, name);
    if (spec == nullptr) {
      const std::string suggestion = closest_key(name, names);
      const std::string hint =
          suggestion.empty() ? "." : "; did you mean '" + suggestion + "'?";
      throw ConfigError(path, where + "unknown key '" + name + "'" + hint +
                                  " This component accepts: " + key_names(schema) + ".");
    }
    const std::string expected(value_type_phrase(spec->type));
    if (!matches_type(node, spec->type)) {
      const std::string example = spec->default_literal.empty()
                                      ? "."
                                      : ", e.g. " + name + " = " + spec->default_literal +
                                            " (the default).";
      throw ConfigError(path, where + "key '" + name + "' expected " + expected + ", got " +
                                  describe_node(node) + ". Set it to " + expected + example +
                                  (spec->help.empty() ? "" : " " + name + ": " + spec->help + "."));
    }
    if (node.is_string() && !choice_allows(*spec, node.as_string()->get())) {
      throw ConfigError(path, where + "key '" + name + "' is " + describe_node(node) +
                                  ", which is not allowed; expected " + choices_phrase(*spec) +
                                  ".");
    }
    if (spec->is_path) resolved_paths.emplace_back(name, resolve_config_path(node, source_file));
  }
  for (auto& [name, value] : resolved_paths) component.options.insert_or_assign(name, std::move(value));

  // 2. Required keys are present; defaults fill the rest; values take their canonical type.
  for (const KeySpec& spec : schema) {
    if (!component.options.contains(spec.path)) {
      if (spec.default_literal.empty()) {
        const std::string file = source_file.empty() ? "config" : std::string(source_file);
        throw ConfigError(component.key_path + "." + spec.path,
                          file + ": " + label + ": missing required key '" + spec.path + "' (" +
                              std::string(value_type_phrase(spec.type)) +
                              (spec.help.empty() ? "" : "; " + spec.help) + "). Add " + spec.path +
                              " = <value> to [" + component.key_path + "].");
      }
      std::string error;
      if (!parse_value_into(component.options, spec.path, spec.default_literal, "default",
                            &error)) {
        // plugin_schema() already refuses such a default, so this is a host bug.
        throw Error(label + ": the default of '" + spec.path + "' does not parse: " + error);
      }
    }
    coerce_to_type(component.options, spec.path, spec.type);
  }
}

void resolve_path_keys(ComponentConfig& component, const std::vector<KeySpec>& schema, std::string_view source_file) {
  for (const KeySpec& spec : schema) {
    if (!spec.is_path) continue;
    const toml::node* node = component.options.get(spec.path);
    if (node == nullptr || !node->is_string()) continue; // validate_component names a wrong type
    std::string resolved = resolve_config_path(*node, source_file);
    component.options.insert_or_assign(spec.path, std::move(resolved));
  }
}

void store_resolved(RunConfig& cfg, const ComponentConfig& component) {
  toml::table table = component.options;
  table.insert_or_assign(kComponentKey, component.component);
  const std::string& path = component.key_path;
  const std::size_t open = path.find('[');
  if (open == std::string::npos) {
    const ComponentSlot* slot = find_component_slot(path);
    if (slot == nullptr || slot->array) {
      throw Error("store_resolved: '" + path + "' is not a component table path");
    }
    const std::size_t dot = path.find('.');
    toml::table* parent = &cfg.resolved;
    if (dot != std::string::npos) {
      const std::string section = path.substr(0, dot);
      parent = ensure_tables(*parent, section);
      if (parent == nullptr) throw Error("store_resolved: [" + section + "] is not a table");
    }
    parent->insert_or_assign(path.substr(dot == std::string::npos ? 0 : dot + 1), std::move(table));
    return;
  }
  const std::string slot_path = path.substr(0, open);
  const ComponentSlot* slot = find_component_slot(slot_path);
  const std::size_t index = std::stoul(path.substr(open + 1));
  if (slot == nullptr || !slot->array) {
    throw Error("store_resolved: '" + path + "' is not a component table path");
  }
  // "metrics" sits at the top level, "data.batch_transforms" in [data].
  toml::table* parent = &cfg.resolved;
  std::string name = slot_path;
  if (const std::size_t dot = slot_path.find('.'); dot != std::string::npos) {
    const std::string section = slot_path.substr(0, dot);
    parent = ensure_tables(*parent, section);
    if (parent == nullptr) throw Error("store_resolved: [" + section + "] is not a table");
    name = slot_path.substr(dot + 1);
  }
  if (!parent->contains(name)) parent->insert_or_assign(name, toml::array{});
  toml::array* array = parent->get_as<toml::array>(name);
  if (array == nullptr || index > array->size()) {
    throw Error("store_resolved: '" + path + "' is past the end of the resolved " + name);
  }
  if (index == array->size()) array->push_back(std::move(table));
  else array->replace(array->cbegin() + static_cast<std::ptrdiff_t>(index), std::move(table));
}

}  // namespace tp
