#include "tp/framework/config/overrides.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "tp/framework/config/closest_key.h"
#include "tp/framework/config/host_table.h"
#include "tp/framework/config/install_layout.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

struct Segment {
  std::string name;
  std::optional<std::size_t> index; ///< "metrics[2]" -> 2
};

std::string_view trim(std::string_view text) {
  const auto space = [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

[[noreturn]] void bad_override(const std::string& key_path, const std::string& origin,
                               const std::string& problem) {
  throw ConfigError(key_path, origin + ": " + problem);
}

/// The table at dotted `tables` below `parent` (one key, or "logging.mlflow"), created when absent.
toml::table& ensure_table(toml::table& parent, std::string_view tables, const std::string& path,
                          const std::string& origin) {
  const toml::node* blocked = nullptr;
  toml::table* table = ensure_tables(parent, tables, &blocked);
  if (table == nullptr) {
    bad_override(path, origin, "cannot set a key inside '" + path + "', which is " + describe_node(*blocked) +
                                   ", not a table.");
  }
  return *table;
}

std::vector<Segment> split_path(const std::string& path, const std::string& origin) {
  std::vector<Segment> segments;
  std::string_view rest = path;
  while (true) {
    const std::size_t dot = rest.find('.');
    std::string_view part = rest.substr(0, dot);
    Segment segment;
    const std::size_t open = part.find('[');
    if (open != std::string_view::npos) {
      const std::string_view digits = part.substr(open + 1, part.size() - open - 2);
      if (!part.ends_with(']') || digits.empty() ||
          digits.find_first_not_of("0123456789") != std::string_view::npos) {
        bad_override(path, origin, "malformed key '" + path + "'; index arrays of tables as " +
                                       "metrics[0].key.");
      }
      segment.index = std::stoul(std::string(digits));
      part = part.substr(0, open);
    }
    if (part.empty()) {
      bad_override(path, origin, "malformed key '" + path + "'; write --set table.key=value.");
    }
    segment.name = std::string(part);
    segments.push_back(std::move(segment));
    if (dot == std::string_view::npos) break;
    rest = rest.substr(dot + 1);
  }
  return segments;
}

/// The component table that `segments` (minus its last element, the key) addresses, or nullptr
/// when they do not start with a component slot.
toml::table* component_target(toml::table& root, const std::vector<Segment>& segments,
                              const std::string& path, const std::string& origin) {
  const ComponentSlot* slot = nullptr;
  std::size_t used = 0;
  if (segments.size() >= 2 && !segments[0].index) {
    slot = find_component_slot(segments[0].name + "." + segments[1].name);
    used = 2;
  }
  if (slot == nullptr) {
    slot = find_component_slot(segments[0].name);
    used = 1;
  }
  if (slot == nullptr) return nullptr;
  const std::string slot_path(slot->path);
  const Segment& last = segments[used - 1];
  if (slot->array != last.index.has_value()) {
    bad_override(path, origin, slot->array
        ? "'" + slot_path + "' is an array of tables; address one entry as " + slot_path +
              "[0].key=value."
        : "'" + slot_path + "' is a single table; write " + slot_path + ".key=value.");
  }
  if (segments.size() != used + 1 || segments.back().index) {
    bad_override(path, origin, "'" + path + "' must name one key of the [" + slot_path +
                                   "] component table, e.g. " + slot_path +
                                   (slot->array ? "[0]" : "") + ".component=" +
                                   std::string(slot->example_id) + "; component keys are flat.");
  }
  toml::table* parent = &root;
  if (used == 2) parent = &ensure_table(root, segments[0].name, segments[0].name, origin);
  if (!slot->array) return &ensure_table(*parent, last.name, slot_path, origin);

  if (!parent->contains(last.name)) parent->insert_or_assign(last.name, toml::array{});
  toml::array* array = parent->get_as<toml::array>(last.name);
  if (array == nullptr) {
    bad_override(path, origin, "'" + slot_path + "' is not an array of tables in the config.");
  }
  const std::size_t index = *last.index;
  if (index > array->size()) {
    bad_override(path, origin, "index " + std::to_string(index) + " is past the end of " +
                                   slot_path + " (" + std::to_string(array->size()) +
                                   " entries); use " + std::to_string(array->size()) +
                                   " to append one.");
  }
  if (index == array->size()) array->push_back(toml::table{});
  toml::table* entry = array->get_as<toml::table>(index);
  if (entry == nullptr) {
    bad_override(path, origin, slot_path + "[" + std::to_string(index) + "] is not a table.");
  }
  return entry;
}

/// Sets host key `spec` in `root` to `text`, creating its tables ([logging], [logging.mlflow]).
void set_host_key(toml::table& root, const KeySpec& spec, std::string_view text, const std::string& path,
                  const std::string& origin) {
  const std::size_t dot = spec.path.rfind('.');
  toml::table& table = ensure_table(root, std::string_view(spec.path).substr(0, dot), path, origin);
  set_value_or_string(table, std::string_view(spec.path).substr(dot + 1), text, origin);
}

}  // namespace

Override parse_override(std::string_view text) {
  const std::size_t equals = text.find('=');
  const std::string key(trim(text.substr(0, equals)));
  if (equals == std::string_view::npos || key.empty()) {
    throw ConfigError(key, std::string(kSetOriginPrefix) + redact_uri_credentials(text) +
                               ": expected key.path=value, e.g. --set optim.lr=3e-4.");
  }
  return {key, std::string(trim(text.substr(equals + 1)))};
}

void apply_environment(toml::table& root, const std::map<std::string, std::string>& env) {
  for (const KeySpec& spec : host_key_schema()) {
    const std::string variable = env_mirror_name(spec.path);
    const auto found = env.find(variable);
    if (found == env.end()) continue;
    // The origin is shown in error messages: a URI's credentials are not (secrets.h).
    const std::string origin = std::string(kEnvOriginPrefix) + variable + "=" + redact_uri_credentials(found->second);
    set_host_key(root, spec, trim(found->second), spec.path, origin);
  }
}

const std::vector<std::string>& tool_environment_variables() {
  // Read by scripts/ and .ci/ (docs/build.md, docs/testing.md, docs/gpu.md) and by tests; a new
  // one belongs here, or every host it starts warns about it.
  static const std::vector<std::string> names = {
      "TP_CI_SANITIZE", "TP_DETECTION_FIXTURES", "TP_EFFICIENTNET_FIXTURES", "TP_FUZZ_CHECKPOINT", "TP_FUZZ_JOBS",
      "TP_GPU_COMMIT", "TP_KILL9_SEED", "TP_SANITIZE_JOBS", "TP_SEGMENTATION_FIXTURES", "TP_TIDY_CACHE", "TP_UNITY",
      "TP_VENV_CACHE", "TP_VENV_CACHE_DIR", "TP_ZOO_CONVNEXT_VIT_FIXTURES"};
  return names;
}

std::vector<std::string> unknown_environment_variables(const std::map<std::string, std::string>& env) {
  std::vector<std::string> mirrors;
  for (const KeySpec& spec : host_key_schema()) mirrors.push_back(env_mirror_name(spec.path));
  const std::vector<std::string>& tools = tool_environment_variables();
  std::vector<std::string> warnings;
  for (const auto& [name, value] : env) {
    if (!name.starts_with("TP_")) continue;
    if (std::find(mirrors.begin(), mirrors.end(), name) != mirrors.end()) continue;
    if (std::find(tools.begin(), tools.end(), name) != tools.end()) continue;
    // The name only: the value may be a token (TP_MY_TOKEN), and a log is no place for it.
    const std::string suggestion = closest_key(name, mirrors);
    warnings.push_back("environment variable " + name + " is ignored: no config key has that mirror (host keys " +
                       "`table.key` are read from TP_TABLE_KEY; component keys have none)" +
                       (suggestion.empty() ? "." : "; did you mean " + suggestion + "?"));
  }
  return warnings;
}

void apply_overrides(toml::table& root, const std::vector<std::string>& overrides) {
  for (const std::string& text : overrides) {
    const Override parsed = parse_override(text);
    const std::string& path = parsed.key_path;
    const std::string origin = std::string(kSetOriginPrefix) + redact_uri_credentials(text);
    if (const KeySpec* spec = find_host_key(path)) {
      set_host_key(root, *spec, parsed.value_text, path, origin);
      continue;
    }
    const std::vector<Segment> segments = split_path(path, origin);
    if (toml::table* target = component_target(root, segments, path, origin)) {
      set_value_or_string(*target, segments.back().name, parsed.value_text, origin);
      continue;
    }
    const std::string suggestion = suggest_host_path(path);
    bad_override(path, origin,
                 "unknown key '" + path + "'" +
                     (suggestion.empty() ? "." : "; did you mean '" + suggestion + "'?") +
                     " --set takes a host key (see " + reference_config() + ") or a key of a "
                     "component table (model.<key>, loss.<key>, data.train.<key>, "
                     "metrics[0].<key>).");
  }
}

}  // namespace tp
