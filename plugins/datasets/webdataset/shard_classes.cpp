#include "shard_classes.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "listing_text.h"
#include "tp/cpp/guard.h"
#include "regular_input.h"

namespace tp::webdataset {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;

constexpr const char* kSuffix = "-shards.json";
// A description is a few hundred bytes and its class list; more is not one of ours.
constexpr std::uintmax_t kMaxDescriptionBytes = std::uintmax_t{64} << 20;

nlohmann::json read_json(const std::string& path) {
  datasets::refuse_special_input(path, "webdataset", "the shards' description");
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

/// The names' problems, naming where they come from (`where`: "class_names" or the file).
void check_names(const std::vector<std::string>& names, const std::string& where) {
  std::set<std::string> seen;
  for (std::size_t id = 0; id < names.size(); ++id) {
    if (const std::string problem = datasets::class_name_text_problem(names[id]); !problem.empty())
      throw Failure(TP_ERR_CONFIG, "webdataset: " + where + " names class " + std::to_string(id) + " '" +
                                       datasets::shown_bytes(names[id]) + "', a name that " + problem +
                                       "; a class name must be UTF-8 text without control characters (it is written "
                                       "into checkpoints and predictions)");
    if (!seen.insert(names[id]).second)
      throw Failure(TP_ERR_CONFIG, "webdataset: " + where + " names the class '" + names[id] +
                                       "' twice; give each class id its own name");
  }
}

bool ids_only(const std::vector<std::string>& names) {
  for (std::size_t id = 0; id < names.size(); ++id)
    if (names[id] != std::to_string(id)) return false;
  return true;
}

}  // namespace

std::string find_shard_description(const std::string& pattern) {
  const fs::path given(pattern);
  const fs::path dir = given.has_parent_path() ? given.parent_path() : fs::path(".");
  const std::string name = given.filename().string();
  std::string by_prefix;
  std::size_t longest = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string file = it->path().filename().string();
    std::error_code kind_error;
    if (file.size() <= std::string(kSuffix).size() || file.compare(file.size() - std::string(kSuffix).size(), std::string::npos, kSuffix) != 0 ||
        !it->is_regular_file(kind_error) || it->file_size(kind_error) > kMaxDescriptionBytes)
      continue;
    const nlohmann::json doc = read_json(it->path().string());
    if (doc.is_object() && doc.contains("pattern") && doc["pattern"] == name) return it->path().string();
    const std::string prefix = file.substr(0, file.size() - std::string(kSuffix).size()) + "-";
    if (name.compare(0, prefix.size(), prefix) == 0 && prefix.size() > longest) {
      longest = prefix.size();
      by_prefix = it->path().string();
    }
  }
  return by_prefix;
}

ShardClasses shard_classes(const std::string& pattern, const char* key, const std::vector<std::string>& configured) {
  ShardClasses out;
  const std::string description = find_shard_description(pattern);
  std::vector<std::string> described;
  if (!description.empty()) {
    const nlohmann::json doc = read_json(description);
    if (!doc.is_object())
      throw Failure(TP_ERR_CONFIG, "webdataset: '" + description + "', the description beside the shards of `" + key +
                                       "`, is not a JSON object; rewrite the shards with host shards write, or remove "
                                       "the file and give the names in `class_names`");
    if (doc.contains("classes")) {
      const nlohmann::json& classes = doc["classes"];
      bool strings = classes.is_array();
      for (std::size_t i = 0; strings && i < classes.size(); ++i) strings = classes[i].is_string();
      if (!strings)
        throw Failure(TP_ERR_CONFIG, "webdataset: '" + description + "' holds \"classes\" that are not a list of "
                                         "strings; fix it, or remove the key and give the names in `class_names`");
      for (const nlohmann::json& name : classes) described.push_back(name.get<std::string>());
      check_names(described, "'" + description + "'");
    }
    // Informational (row names): a description without it, or of another shape, names none.
    if (const auto source = doc.find("source"); source != doc.end() && source->is_object())
      if (const auto root = source->find("root"); root != source->end() && root->is_string())
        out.source_root = root->get<std::string>();
  }
  if (!configured.empty()) {
    check_names(configured, "class_names");
    if (!described.empty() && described.size() != configured.size())
      throw Failure(TP_ERR_CONFIG, "webdataset: class_names names " + std::to_string(configured.size()) +
                                       " classes, but '" + description + "', written with the shards of `" + key +
                                       "`, names " + std::to_string(described.size()) +
                                       ": their labels are ids of those classes. Give one name per class id in their "
                                       "order, or leave class_names empty to use the file's");
    out.names = configured;
    out.source = "class_names";
  } else if (!described.empty() && !ids_only(described)) {
    out.names = std::move(described);
    out.source = description;
  }
  return out;
}

}  // namespace tp::webdataset
