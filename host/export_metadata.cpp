#include "export_metadata.h"

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include <sstream>
#include <string>

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/engine/version_text.h"
#include "tp/framework/error.h"
#include "tp/version.h"

namespace tp::cli {
namespace {

using Json = nlohmann::ordered_json;

// A TOML value as JSON; strings redacted (a URI with credentials in a dataset's options).
Json json_of(const toml::node& node) {
  if (const toml::table* table = node.as_table()) {
    Json out = Json::object();
    for (const auto& [key, value] : *table) out[std::string(key.str())] = json_of(value);
    return out;
  }
  if (const toml::array* array = node.as_array()) {
    Json out = Json::array();
    for (const toml::node& item : *array) out.push_back(json_of(item));
    return out;
  }
  if (const auto* text = node.as_string()) return redact_uri_credentials(text->get());
  if (const auto* integer = node.as_integer()) return integer->get();
  if (const auto* real = node.as_floating_point()) return real->get();
  if (const auto* flag = node.as_boolean()) return flag->get();
  std::ostringstream other; // dates and times, which no component key uses today
  node.visit([&](const auto& value) { other << value; });
  return other.str();
}

std::string dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

// {"component": id, "options": {the rest}} of a component table.
Json component_json(const toml::table& table) {
  Json out = Json::object();
  const auto* component = table.get_as<std::string>("component");
  out["component"] = component != nullptr ? component->get() : "";
  Json options = Json::object();
  for (const auto& [key, value] : table)
    if (key.str() != "component") options[std::string(key.str())] = json_of(value);
  out["options"] = std::move(options);
  return out;
}

bool flag(const toml::table& table, const char* key, bool fallback) {
  const auto* value = table.get_as<bool>(key);
  return value != nullptr ? value->get() : fallback;
}

// Which split the run evaluated and the table it read it from, as create_components picks it:
// [data.val], or [data.train] under val_from_train; else the test split likewise; else training.
struct EvaluatedTable {
  std::string split, table; ///< "val", "data.train"
  const toml::table* values = nullptr;
};

EvaluatedTable evaluated_table(const toml::table& data) {
  const toml::table* train = data.get_as<toml::table>("train");
  for (const std::string split : {"val", "test"}) {
    if (const toml::table* own = data.get_as<toml::table>(split)) return {split, "data." + split, own};
    if (train != nullptr && flag(data, (split + "_from_train").c_str(), false)) return {split, "data.train", train};
  }
  return {"train", "data.train", train};
}

// The evaluation table as JSON with its decode settings spelled out; null without one.
Json preprocessing_json(const toml::table& config) {
  const toml::table* data = config.get_as<toml::table>("data");
  if (data == nullptr) return nullptr;
  const auto [split, name, table] = evaluated_table(*data);
  if (table == nullptr) return nullptr;
  const Json component = component_json(*table);
  Json out = Json::object();
  out["split"] = split;
  out["table"] = name;
  out["component"] = component["component"];
  out["options"] = component["options"];
  Json decode = Json::object();
  if (const auto* where = data->get_as<std::string>("decode")) decode["data.decode"] = where->get();
  if (const auto* fast = table->get_as<bool>("fast_decode")) {
    decode["fast_decode"] = fast->get();
    // interpolation = "bicubic" decodes JPEGs at full size whatever fast_decode says (b9d8d31):
    // the reduced-scale decode is a filter PIL's resize never applies.
    const auto* interpolation = table->get_as<std::string>("interpolation");
    const bool bicubic = interpolation != nullptr && interpolation->get() == "bicubic";
    decode["note"] = fast->get() && !bicubic
                         ? "JPEGs were decoded at a reduced DCT scale (1/2, 1/4 or 1/8, libjpeg's scaling, "
                           "OpenCV's IMREAD_REDUCED_*) whenever the crop still covers the output size at that "
                           "scale: a program that decodes at full size and then resizes gets other pixels and "
                           "other logits. Decode the same way, or retrain with fast_decode = false "
                           "(docs/deployment.md)."
                         : bicubic ? "JPEGs were decoded at full size (interpolation = \"bicubic\" ignores fast_decode), "
                                     "then resized as PIL's antialiased bicubic."
                                   : "JPEGs were decoded at full size.";
  }
  out["decode"] = std::move(decode);
  return out;
}

// [{"library", "sha256", "components"}] of the checkpoint's [[provenance.plugins]]; the path is
// left out (it names a directory of the machine that trained, not the plugin).
Json plugin_files_json(const std::string& provenance_toml) {
  if (provenance_toml.empty()) return nullptr;
  toml::table provenance;
  try {
    provenance = parse_toml(provenance_toml, "the checkpoint's provenance");
  } catch (const toml::parse_error&) {
    return nullptr; // unreadable provenance is no reason to refuse an export; the ids are written anyway
  }
  const toml::array* plugins = provenance.at_path("provenance.plugins").as_array();
  if (plugins == nullptr) return nullptr;
  Json out = Json::array();
  for (const toml::node& node : *plugins) {
    const toml::table* plugin = node.as_table();
    if (plugin == nullptr) continue;
    Json entry = Json::object();
    for (const char* key : {"library", "sha256", "components"})
      if (const toml::node* value = plugin->get(key)) entry[key] = json_of(*value);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> deployment_metadata(const LoadedCheckpoint& checkpoint) {
  toml::table config;
  try {
    config = parse_toml(checkpoint.config_toml, "the checkpoint's config");
  } catch (const toml::parse_error& e) {
    throw Error("host export: the checkpoint's config cannot be read (" + std::string(e.description()) + ")");
  }
  std::map<std::string, std::string> metadata;
  if (const toml::table* model = config.get_as<toml::table>("model"))
    metadata["torchhost.model"] = dump(component_json(*model));
  if (!checkpoint.classes.empty()) {
    metadata["torchhost.classes"] = dump(Json(checkpoint.classes.names));
    metadata["torchhost.class_field"] = checkpoint.classes.field;
  }
  // A binary cross entropy trained each class's own sigmoid (multi-label): the scores to read.
  if (const toml::table* loss = config.get_as<toml::table>("loss");
      loss != nullptr && (*loss)["component"].value_or(std::string()) == "org.torchhost.bce_with_logits")
    metadata["torchhost.scores"] = dump(Json("sigmoid"));
  if (const Json preprocessing = preprocessing_json(config); !preprocessing.is_null())
    metadata["torchhost.preprocessing"] = dump(preprocessing);
  if (const Json plugins = plugin_files_json(checkpoint.provenance_toml); !plugins.is_null())
    metadata["torchhost.plugin_files"] = dump(plugins);
  return metadata;
}

std::map<std::string, std::string> writer_metadata() {
  // host_version_text()'s first line is "torchhost <git describe>".
  const std::string text = host_version_text();
  std::string version = text.substr(0, text.find('\n'));
  if (version.starts_with("torchhost ")) version.erase(0, 10);
  return {{"torchhost.version", version},
          {"torchhost.libtorch", TORCH_VERSION},
          {"torchhost.plugin_abi", std::to_string(TP_ABI_MAJOR) + "." + std::to_string(TP_ABI_MINOR)},
          {"torchhost.format", std::to_string(kExportFormat)}};
}

}  // namespace tp::cli
