#include "export_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "tp/framework/checkpoint/safetensors.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/bounded_json.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/regular_file.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {
namespace {

using Json = nlohmann::json;

// The export wrote the run's resolved TOML tables as JSON (host/export_metadata.cpp); these map
// each value back to its TOML kind, so the component's schema validates the table it trained with.
void push(toml::array& array, const Json& value);

toml::table table_of(const Json& object) {
  toml::table table;
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) table.insert_or_assign(key, table_of(value));
    else if (value.is_array()) {
      toml::array array;
      for (const Json& item : value) push(array, item);
      table.insert_or_assign(key, std::move(array));
    } else if (value.is_boolean()) table.insert_or_assign(key, value.get<bool>());
    else if (value.is_number_integer()) table.insert_or_assign(key, value.get<int64_t>());
    else if (value.is_number_float()) table.insert_or_assign(key, value.get<double>());
    else if (value.is_string()) table.insert_or_assign(key, value.get<std::string>());
  }
  return table;
}

void push(toml::array& array, const Json& value) {
  if (value.is_object()) array.push_back(table_of(value));
  else if (value.is_array()) {
    toml::array inner;
    for (const Json& item : value) push(inner, item);
    array.push_back(std::move(inner));
  } else if (value.is_boolean()) array.push_back(value.get<bool>());
  else if (value.is_number_integer()) array.push_back(value.get<int64_t>());
  else if (value.is_number_float()) array.push_back(value.get<double>());
  else if (value.is_string()) array.push_back(value.get<std::string>());
}

ExportedComponent component_of(const Json& json) {
  return {json.value("component", std::string()), table_of(json.value("options", Json::object()))};
}

}  // namespace

ExportFile read_export(const std::filesystem::path& path) {
  const std::string file = "'" + path.string() + "'";
  std::error_code status_error;
  if (std::filesystem::is_directory(path, status_error))
    throw Error("tp::infer: the export " + file + " is a directory; give the file `host export` wrote (its "
                "--output, e.g. model.safetensors).");
  // Regular files only, read by fstat's size: a FIFO had hung the caller for good, /dev/zero
  // filled its memory (security trial F3).
  std::vector<char> bytes;
  try {
    bytes = read_regular_file(path);
  } catch (const UnreadableFile& e) {
    throw Error("tp::infer: cannot read the export " + file + ": it " + e.what() +
                "; give the file `host export` wrote (a regular file).");
  }
  // safetensors: an 8-byte little-endian header length, then the JSON header with "__metadata__".
  uint64_t length = 0;
  for (int i = 7; i >= 0 && bytes.size() >= 8; --i) length = (length << 8) | static_cast<unsigned char>(bytes[i]);
  // A header that cannot be read is a cut or damaged file (a half-finished copy), or no
  // safetensors file at all; never "not host export's" (deployment trial F5).
  const auto unreadable = [&](const std::string& what) {
    return Error("tp::infer: the export " + file + " is damaged or truncated, or no safetensors file: " + what +
                 ". Copy it again whole, or export it again: host export --checkpoint RUN/checkpoints/best.pt "
                 "--format safetensors --output FILE.");
  };
  const std::string size = std::to_string(bytes.size()) + " bytes";
  // A text file (a config, a list) given by mistake: no header length begins with 8 characters.
  if (bytes.size() >= 8 && std::all_of(bytes.begin(), bytes.begin() + 8, [](char c) {
        return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t';
      }))
    throw Error("tp::infer: " + file + " is not a model `host export` wrote: it begins with text, and a safetensors "
                "file begins with its header's length. Export the run's checkpoint with this host: host export "
                "--checkpoint RUN/checkpoints/best.pt --format safetensors --output FILE.");
  if (bytes.size() < 8)
    throw unreadable("it holds " + size + ", less than the 8 of a safetensors header's length");
  if (length > bytes.size() - 8)
    throw unreadable("it holds " + size + ", and its header says " + std::to_string(length) +
                     " bytes of JSON follow the first 8");
  const Json header = parse_bounded_json(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  if (!header.is_object())
    throw unreadable("its header (" + std::to_string(length) + " bytes after the first 8, of " + size +
                     ") is not a JSON object nested at most " + std::to_string(kMaxJsonDepth) + " deep");
  const Json metadata = header.value("__metadata__", Json::object());
  if (!metadata.is_object() || !metadata.contains("torchhost.model"))
    throw Error("tp::infer: " + file + " is not a model `host export` wrote (its safetensors metadata has no "
                "torchhost.model: the model component and options to build the network from). Export the run's "
                "checkpoint with this host: host export --checkpoint RUN/checkpoints/best.pt --format safetensors "
                "--output FILE.");
  const auto json_entry = [&](const char* key) {
    const auto entry = metadata.find(key);
    Json value = parse_bounded_json(entry != metadata.end() && entry->is_string() ? entry->get<std::string>() : "null");
    if (value.is_discarded())
      throw Error("tp::infer: the metadata " + std::string(key) + " of " + file +
                  " is not valid JSON; the file is damaged: export it again.");
    return value;
  };
  // The component ids go into messages and name the plugins to build with: a text that is no id
  // (control characters, a path) is a damaged or forged file, never printed as it is.
  const auto component_in = [&](const char* key, const Json& json) {
    ExportedComponent component = component_of(json);
    if (!component.component.empty() && !is_component_id(component.component))
      throw Error("tp::infer: the metadata " + std::string(key) + " of " + file + " names the component '" +
                  escape_control_characters(bounded_text(component.component, 200), false) +
                  "', which is not a component id (reverse-DNS, e.g. org.torchhost.resnet); the file is damaged: "
                  "export it again.");
    return component;
  };
  ExportFile out;
  for (const auto& [key, value] : metadata.items())
    if (value.is_string()) out.metadata.emplace(key, value.get<std::string>());
  out.model = component_in("torchhost.model", json_entry("torchhost.model"));
  if (const Json preprocessing = json_entry("torchhost.preprocessing"); preprocessing.is_object())
    out.preprocessing = component_in("torchhost.preprocessing", preprocessing);
  if (const Json classes = json_entry("torchhost.classes"); classes.is_array())
    for (const Json& name : classes) out.classes.push_back(name.is_string() ? name.get<std::string>() : "");
  out.sigmoid_scores = json_entry("torchhost.scores") == Json("sigmoid");
  // Only for a warning at open, which prints them: an entry without a plain file name and a
  // SHA-256 in hex is passed over.
  if (const Json plugins = json_entry("torchhost.plugin_files"); plugins.is_array())
    for (const Json& plugin : plugins)
      if (plugin.is_object() && plugin.value("library", Json()).is_string() && plugin.value("sha256", Json()).is_string()) {
        std::string library = plugin["library"].get<std::string>();
        std::string sha256 = plugin["sha256"].get<std::string>();
        const bool plain_name = !library.empty() && library.size() <= 255 &&
                                std::all_of(library.begin(), library.end(), [](char c) {
                                  return c > 0x20 && c < 0x7f && c != '/';
                                });
        const bool hex = sha256.size() == 64 && std::all_of(sha256.begin(), sha256.end(), [](char c) {
                           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                         });
        if (plain_name && hex) out.plugin_files.push_back({std::move(library), std::move(sha256)});
      }
  try {
    out.weights = read_safetensors(bytes);
  } catch (const tp::Error& e) {
    throw Error("tp::infer: the weights of " + file + " cannot be read (" + e.what() +
                "); the file is damaged: export it again.");
  }
  return out;
}

}  // namespace tp::infer::detail
