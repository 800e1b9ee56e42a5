#include "tp/framework/config/schema.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <set>

#include "tp/framework/config/host_keys.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

using VT = ValueType;

bool is_bare_key(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-';
  });
}

[[noreturn]] void plugin_key_error(std::string_view component_id, std::string_view key,
                                   const std::string& problem) {
  throw PluginLoadError("component '" + std::string(component_id) + "' declares config key '" +
                        std::string(key) + "' " + problem +
                        ". The plugin must fix its tp_config_key_t table (rule PLG-6); "
                        "until then it cannot be loaded.");
}

}  // namespace

const std::vector<KeySpec>& host_key_schema() {
  static const std::vector<KeySpec> schema = [] {
    std::vector<KeySpec> specs;
    for (const HostKey& key : host_keys()) specs.push_back(key.spec);
    return specs;
  }();
  return schema;
}

const KeySpec* find_host_key(std::string_view path) {
  for (const KeySpec& spec : host_key_schema()) {
    if (spec.path == path) return &spec;
  }
  return nullptr;
}

const std::vector<ComponentSlot>& component_slots() {
  static const std::vector<ComponentSlot> slots = {
      {"model", true, false, "org.torchhost.small_cnn"},
      {"loss", true, false, "org.torchhost.cross_entropy"},
      {"data.train", true, false, "org.torchhost.shapes"},
      {"data.val", false, false, "org.torchhost.shapes"},
      {"data.test", false, false, "org.torchhost.shapes"},
      {"data.batch_transforms", false, true, "org.torchhost.mixup_cutmix"},
      {"metrics", false, true, "org.torchhost.accuracy"},
      {"callbacks", false, true, "org.example.csv_logger"},
  };
  return slots;
}

const ComponentSlot* find_component_slot(std::string_view path) {
  for (const ComponentSlot& slot : component_slots()) {
    if (slot.path == path) return &slot;
  }
  return nullptr;
}

std::string env_mirror_name(std::string_view key_path) {
  std::string name = "TP_";
  for (char ch : key_path) {
    name += ch == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return name;
}

std::string_view value_type_phrase(ValueType type) {
  switch (type) {
    case VT::Bool: return "a boolean";
    case VT::Int: return "an integer";
    case VT::Float: return "a float";
    case VT::String: return "a string";
    case VT::IntArray: return "an array of integers";
    case VT::FloatArray: return "an array of floats";
    case VT::StringArray: return "an array of strings";
  }
  return "a value";
}

bool value_type_from_abi(int32_t tp_cfg_type, ValueType* out_type) {
  switch (tp_cfg_type) {
    case TP_CFG_BOOL: *out_type = VT::Bool; return true;
    case TP_CFG_INT: *out_type = VT::Int; return true;
    case TP_CFG_FLOAT: *out_type = VT::Float; return true;
    case TP_CFG_STRING:
    case TP_CFG_PATH: *out_type = VT::String; return true;  // a path is a string the host resolves
    case TP_CFG_INT_ARRAY: *out_type = VT::IntArray; return true;
    case TP_CFG_FLOAT_ARRAY: *out_type = VT::FloatArray; return true;
    case TP_CFG_STRING_ARRAY: *out_type = VT::StringArray; return true;
    default: return false;
  }
}

std::vector<KeySpec> plugin_schema(const tp_config_key_t* keys, uint32_t count,
                                   std::string_view component_id) {
  std::vector<KeySpec> schema;
  if (count == 0) return schema;
  const std::string id(component_id);
  if (keys == nullptr) {
    throw PluginLoadError("component '" + id + "' declares " + std::to_string(count) +
                          " config keys but a NULL key array. The plugin must fix its "
                          "descriptor (rule PLG-6); until then it cannot be loaded.");
  }
  // PLG-2: entries are read with the producer's stride into a zeroed copy, so a plugin built
  // against a longer tp_config_key_t still works; fields past `default_value` are optional.
  const std::size_t stride = keys[0].struct_size;
  const std::size_t minimum = offsetof(tp_config_key_t, default_value) + sizeof(const char*);
  if (stride < minimum) {
    throw PluginLoadError("component '" + id + "' declares config keys with struct_size " +
                          std::to_string(stride) + ", smaller than the " +
                          std::to_string(minimum) + " bytes of ABI 1.0. Set struct_size = "
                          "sizeof(tp_config_key_t) in every entry (rule PLG-6).");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(keys);
  std::set<std::string, std::less<>> seen;
  for (uint32_t i = 0; i < count; ++i) {
    tp_config_key_t key{};
    std::memcpy(&key, bytes + i * stride, std::min(stride, sizeof key));
    const std::string name = key.name != nullptr ? key.name : "";
    const std::string label = name.empty() ? "#" + std::to_string(i) : name;
    if (key.struct_size != stride) {
      plugin_key_error(id, label, "with struct_size " + std::to_string(key.struct_size) +
                                      " while entry #0 has " + std::to_string(stride));
    }
    if (!is_bare_key(name)) {
      plugin_key_error(id, label, "with an empty or invalid name (use snake_case letters, digits "
                                  "and '_')");
    }
    if (name == kComponentKey) {
      plugin_key_error(id, name, "but `component` is reserved: it names the component id");
    }
    if (!seen.insert(name).second) plugin_key_error(id, name, "twice");

    KeySpec spec{name, VT::Bool, "", "", {}};
    if (!value_type_from_abi(key.type, &spec.type)) {
      plugin_key_error(id, name, "with unknown type " + std::to_string(key.type) +
                                     " (expected one of the TP_CFG_* constants)");
    }
    spec.is_path = key.type == TP_CFG_PATH;
    if (stride >= offsetof(tp_config_key_t, help) + sizeof(const char*) && key.help != nullptr) {
      spec.help = key.help;
    }
    if (key.default_value != nullptr) {
      spec.default_literal = key.default_value;
      toml::table scratch;
      std::string error;
      if (!parse_value_into(scratch, "v", spec.default_literal, "default", &error)) {
        plugin_key_error(id, name, "with default '" + spec.default_literal +
                                       "', which is not a TOML value (" + error +
                                       "); strings need quotes, e.g. \"\\\"relu\\\"\"");
      }
      if (!matches_type(*scratch.get("v"), spec.type)) {
        plugin_key_error(id, name, "as " + std::string(value_type_phrase(spec.type)) +
                                       " but its default '" + spec.default_literal + "' is " +
                                       describe_node(*scratch.get("v")));
      }
    }
    schema.push_back(std::move(spec));
  }
  return schema;
}

}  // namespace tp
