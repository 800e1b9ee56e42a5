#include "engine/setup/provenance.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

#ifdef USE_C10D_NCCL
#include <nccl.h>
#endif

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/engine/version_text.h"
#include "tp/version.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/sha256.h"
#include "tp_build_version.h" // generated: TP_HOST_VERSION (cmake/TorchhostBuildVersion.cmake)

extern char** environ;

namespace tp {
namespace {

/// "12.4" from 12040 (CUDA's and cuDNN's major * 1000 + minor * 10 encoding).
std::string cuda_style_version(long code) {
  if (code <= 0) return "";
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

std::string cudnn_version(long code) {
  if (code <= 0) return "";
  // cuDNN 9: major * 10000 + minor * 100 + patch; cuDNN 8: major * 1000 + minor * 100 + patch.
  const long major = code >= 90000 ? code / 10000 : code / 1000;
  const long minor = code >= 90000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

/// The arguments of this process, each shell-quoted where it needs it.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::string argument;
  auto flush = [&] {
    const bool plain = !argument.empty() && argument.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == std::string::npos;
    std::string quoted = "'";
    for (char c : argument) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + (plain ? argument : quoted + "'");
    argument.clear();
  };
  for (char c : raw) {
    if (c == '\0') flush();
    else argument += c;
  }
  if (!argument.empty()) flush();
  return out;
}

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

bool behaviour_variable(const std::string& name) {
  for (const char* exact : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES"})
    if (name == exact) return true;
  for (const char* prefix : {"TP_", "MALLOC_", "NCCL_", "TORCH_", "GLOO_"})
    if (name.starts_with(prefix)) return true;
  return false;
}

/// "id@version" split at its first '@' (a component id is reverse-DNS, it has none).
std::pair<std::string, std::string> id_and_version(const std::string& component) {
  const std::size_t at = component.find('@');
  if (at == std::string::npos) return {component, ""};
  return {component.substr(0, at), component.substr(at + 1)};
}

/// `now`'s components, each as "id@version", or "id@old -> new" where `then` (the checkpoint's
/// [[provenance.plugins]] entry) recorded another version.
std::string versions_then_and_now(const toml::table& then, const std::vector<std::string>& now) {
  std::vector<std::string> recorded;
  if (const toml::array* components = then.get_as<toml::array>("components"))
    for (const toml::node& c : *components)
      if (const auto* text = c.as_string()) recorded.push_back(text->get());
  std::string out;
  for (const std::string& component : now) {
    const auto [id, version] = id_and_version(component);
    std::string shown = component;
    for (const std::string& old : recorded)
      if (const auto [old_id, old_version] = id_and_version(old); old_id == id && old_version != version)
        shown = id + "@" + escape_control_characters(old_version, /*keep_newlines=*/false) + " -> " + version;
    out += (out.empty() ? "" : ", ") + shown;
  }
  return out;
}

/// Whether `text` is a SHA-256 as provenance records it: 64 lower-case hex digits.
bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

Provenance build_provenance() {
  Provenance p;
  p.host_version = TP_HOST_VERSION;
  p.compiler = TP_COMPILER;
  p.build_type = TP_BUILD_TYPE;
  p.libtorch = TORCH_VERSION;
  if (at::hasCUDA()) {
    p.cuda = cuda_style_version(at::detail::getCUDAHooks().versionCUDART());
    if (at::detail::getCUDAHooks().hasCuDNN()) p.cudnn = cudnn_version(at::detail::getCUDAHooks().versionCuDNN());
  }
#ifdef USE_C10D_NCCL
  p.nccl = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#endif
  return p;
}

std::string host_version_text() {
  const Provenance p = build_provenance();
  std::string text = "torchhost " + p.host_version + "\nplugin ABI " + std::to_string(TP_ABI_MAJOR) + "." +
                     std::to_string(TP_ABI_MINOR) + " (plugins of ABI 1.0 to 1." + std::to_string(TP_ABI_MINOR) +
                     " load)\nbuilt with " + p.compiler + ", " + p.build_type + "\nLibTorch " + p.libtorch + "\n";
  if (!p.cuda.empty()) text += "CUDA " + p.cuda + "\n";
  if (!p.cudnn.empty()) text += "cuDNN " + p.cudnn + "\n";
  if (!p.nccl.empty()) text += "NCCL " + p.nccl + "\n";
  return text;
}

Provenance collect_provenance(const RunComponents& parts, const RunConfig& config) {
  Provenance p = build_provenance();
  for (const auto& [library, components] : parts.libraries)
    p.plugins.push_back({library->path().filename().string(), library->path().string(), sha256_file(library->path()),
                         components});
  p.input_files = collect_input_files(parts, config);
  // A password in a URI on the command line (--set logging.mlflow.tracking_uri=...) is not recorded.
  p.command_line = redact_uri_credentials(command_line());
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0) p.hostname = host.data();
  p.started = now_utc();
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = text.substr(0, equals);
    if (!behaviour_variable(name)) continue;
    // Only known settings with their values: TP_MY_TOKEN or TORCH_TOKEN are a user's, perhaps secrets.
    p.environment.emplace_back(name, environment_value_recordable(name)
                                         ? redact_uri_credentials(text.substr(equals + 1))
                                         : std::string(kUnrecordedValue));
  }
  std::sort(p.environment.begin(), p.environment.end());
  return p;
}

std::string provenance_toml(const Provenance& p) {
  toml::table provenance{{"host_version", p.host_version}, {"compiler", p.compiler}, {"build_type", p.build_type},
                         {"libtorch", p.libtorch},         {"cuda", p.cuda},         {"cudnn", p.cudnn},
                         {"nccl", p.nccl},                 {"command_line", p.command_line},
                         {"hostname", p.hostname},         {"started", p.started}};
  toml::table environment;
  for (const auto& [name, value] : p.environment) environment.insert(name, value);
  provenance.insert("environment", std::move(environment));
  toml::array plugins;
  for (const PluginProvenance& plugin : p.plugins) {
    toml::array components;
    for (const auto& c : plugin.components) components.push_back(c);
    plugins.push_back(toml::table{{"library", plugin.library},
                                  {"path", plugin.path},
                                  {"sha256", plugin.sha256},
                                  {"components", std::move(components)}});
  }
  provenance.insert("plugins", std::move(plugins));
  // The files the components read through path keys: --resume compares them (changed_input_files).
  toml::array input_files;
  for (const InputFileProvenance& file : p.input_files) {
    toml::table entry{{"key", file.key}, {"component", file.component}, {"path", file.path}, {"size", file.size},
                      {"mtime_ns", file.mtime_ns}, {"sha256", file.sha256}};
    if (file.sha256.empty()) entry.insert("not_hashed", "larger than 1 GiB: compared by size and modification time only");
    input_files.push_back(std::move(entry));
  }
  if (!input_files.empty()) provenance.insert("input_files", std::move(input_files));
  provenance.insert("resumed_step", p.resumed_step);
  provenance.insert("resumed_epoch", p.resumed_epoch);
  if (p.earlier_dropped > 0) provenance.insert("earlier_dropped", p.earlier_dropped);
  // Who trained the steps before this process: which binaries and which command (a resume's
  // lineage, hardening.md section 7); no environment or paths, to keep each entry small.
  toml::array earlier;
  for (const ProvenanceSegment& segment : p.earlier) {
    toml::table entry{{"started", segment.started},           {"hostname", segment.hostname},
                      {"host_version", segment.host_version}, {"libtorch", segment.libtorch},
                      {"command_line", segment.command_line}};
    if (!segment.cuda.empty()) entry.insert("cuda", segment.cuda);
    if (segment.resumed_step >= 0) entry.insert("resumed_step", segment.resumed_step);
    if (segment.resumed_epoch >= 0) entry.insert("resumed_epoch", segment.resumed_epoch);
    toml::array libraries;
    for (const auto& [library, sha256] : segment.plugins)
      libraries.push_back(toml::table{{"library", library}, {"sha256", sha256}});
    entry.insert("plugins", std::move(libraries));
    earlier.push_back(std::move(entry));
  }
  if (!earlier.empty()) provenance.insert("earlier", std::move(earlier));
  std::ostringstream out;
  out << toml::table{{"provenance", std::move(provenance)}} << "\n";
  return out.str();
}

std::vector<PluginChange> changed_plugins(const std::string& recorded_toml, const Provenance& now) {
  std::vector<PluginChange> changed;
  if (recorded_toml.empty()) return changed;
  toml::table recorded;
  try {
    recorded = parse_toml(recorded_toml);
  } catch (const toml::parse_error&) {
    return changed; // unreadable provenance is no reason to refuse a resume
  }
  const toml::array* plugins = recorded.at_path("provenance.plugins").as_array();
  if (plugins == nullptr) return changed;
  for (const PluginProvenance& plugin : now.plugins)
    for (const toml::node& node : *plugins) {
      const toml::table* then = node.as_table();
      if (then == nullptr || then->get_as<std::string>("library") == nullptr ||
          then->get_as<std::string>("library")->get() != plugin.library)
        continue;
      const std::string old_hash = then->get_as<std::string>("sha256") ? then->get_as<std::string>("sha256")->get() : "";
      if (old_hash == plugin.sha256) continue;
      PluginChange change{plugin.library, {}, ""};
      for (const auto& c : plugin.components) change.component_ids.push_back(id_and_version(c).first);
      // The checkpoint may come from anyone (hardening.md section 10): a recorded hash that is no
      // SHA-256 is shown as not recorded, not printed (security trial F16: ESC[2J in it cleared
      // the terminal and a newline forged a log line).
      const std::string then_hash = is_sha256_hex(old_hash) ? old_hash.substr(0, 12) + "..." : "not recorded";
      change.text = plugin.library + " (" + versions_then_and_now(*then, plugin.components) + "): SHA-256 " +
                    then_hash + " when the checkpoint was written, " + plugin.sha256.substr(0, 12) + "... now";
      changed.push_back(std::move(change));
    }
  return changed;
}

}  // namespace tp
