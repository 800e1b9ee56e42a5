#include <cstdio>

#include "commands.h"
#include "session.h"
#include "tp/framework/plugin/plugin_check.h"

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

}  // namespace

int run_plugins(const Options& options) {
  if (options.action == "check") {
    Logger logger;
    HostServices host(logger, ProcessPlace{});
    Registry registry(host);
    registry.allow_insecure_plugin_dirs(options.allow_insecure_plugin_dir);
    auto library = registry.load_file(options.file);
    std::printf("%s: plugin '%s', ABI %u.%u, %zu component(s)\n", options.file.c_str(), library->name().c_str(),
                library->abi().major, library->abi().minor, library->components().size());
    bool all_ok = true;
    for (const CheckLine& line : check_library(library)) {
      std::printf("  [%s] %s: %s\n", line.ok ? "ok" : "FAIL", line.component.c_str(), line.what.c_str());
      all_ok = all_ok && line.ok;
    }
    return all_ok ? 0 : 1;
  }
  auto session = open_session(options);
  std::printf("plugin search path (highest precedence first):\n");
  const char* env_path = std::getenv("TORCHHOST_PLUGIN_PATH");
  for (const PluginDir& dir : plugin_search_path(options.plugin_dirs, session->config.plugin_dirs,
                                                 env_path != nullptr ? env_path : "", builtin_plugin_dir()))
    std::printf("  %-24s %s\n", dir.origin.c_str(), dir.path.c_str());
  std::printf("components:\n");
  for (const ComponentEntry& entry : session->registry.all()) print_component(*entry.info, *entry.library, options.verbose);
  return 0;
}

}  // namespace tp::cli
