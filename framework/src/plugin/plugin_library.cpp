#include "tp/framework/plugin/plugin_library.h"

#include <torch/version.h>

#include <boost/dll/shared_library.hpp>
#include <dlfcn.h>

#include <cstddef>
#include <cstring>

#include "interface_check.h"
#include "load_failure.h"
#include "sized_copy.h"
#include "tp/framework/error.h"
#include "tp/framework/ops/fused_ops.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/framework/util/bounded_text.h"

namespace tp {

struct PluginLibrary::Impl {
  boost::dll::shared_library library;
};

namespace {

std::string version_text(tp_version_t v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

}  // namespace

bool is_component_id(std::string_view id) {
  if (id.empty() || id.find('.') == std::string_view::npos || id.front() == '.' || id.back() == '.' ||
      id.find("..") != std::string_view::npos)
    return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

BuildFingerprint BuildFingerprint::host() {
  return BuildFingerprint{TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, TP_TORCH_DEVICE_BUILD};
}

std::string BuildFingerprint::describe() const {
  const char* device = device_build == TP_BUILD_CUDA ? "CUDA" : device_build == TP_BUILD_CPU ? "CPU" : "no";
  return "LibTorch " + torch_version + ", _GLIBCXX_USE_CXX11_ABI=" + std::to_string(cxx11_abi) + ", " +
         device + " build";
}

const char* interface_id_for_kind(int32_t kind) {
  switch (kind) {
    case TP_KIND_DATASET: return "tp.dataset/1";
    case TP_KIND_CALLBACK: return "tp.callback/1";
    case TP_KIND_MODEL: return "tp.model/1";
    case TP_KIND_LOSS: return "tp.loss/1";
    case TP_KIND_METRIC: return "tp.metric/1";
    case TP_KIND_BATCH_TRANSFORM: return "tp.batch_transform/1";
    default: return nullptr;
  }
}

const char* kind_name(int32_t kind) {
  switch (kind) {
    case TP_KIND_DATASET: return "dataset";
    case TP_KIND_CALLBACK: return "callback";
    case TP_KIND_MODEL: return "model";
    case TP_KIND_LOSS: return "loss";
    case TP_KIND_METRIC: return "metric";
    case TP_KIND_BATCH_TRANSFORM: return "batch_transform";
    default: return "unknown";
  }
}

PluginLibrary::PluginLibrary(std::filesystem::path path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}

PluginLibrary::~PluginLibrary() {
  // Reverse of load: components are gone (they hold shared_ptrs to us), so deinit, then dlclose.
  if (initialised_ && entry_.deinit != nullptr) in_plugin_call(name_.c_str(), "deinit", [&] { entry_.deinit(); });
}

std::shared_ptr<PluginLibrary> PluginLibrary::load(const std::filesystem::path& path, const HostServices& host) {
  const std::string file = path.string();
  if (!std::filesystem::is_regular_file(path))
    throw PluginLoadError("plugin " + file + " does not exist or is not a file.");
  // The host's fused ops stay linked (and registered) for the plugins that look them up.
  ops::link_fused_ops();
  auto impl = std::make_unique<Impl>();
  try {
    // RTLD_NOW: an unresolved symbol fails here, with a message, instead of killing the process
    // at first use (exit 127). RTLD_LOCAL: two plugins defining the same class never mix.
    // RTLD_NODELETE: dlclose leaves the code mapped, so a thread the plugin left running past
    // deinit (PLG-13 forbids it, a logging or upload thread does it) cannot fault in unmapped
    // code after the run has saved everything (a bare exit 139); a library loaded again in the
    // same process is that mapping, its init called again. Boost.DLL hands the bits to dlopen.
    // dlopen runs the library's static constructors: a crash there names the file (exit 5).
    const auto mode = static_cast<boost::dll::load_mode::type>(
        static_cast<unsigned>(boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local) | RTLD_NODELETE);
    in_plugin_call(file.c_str(), "dlopen (its static constructors)", [&] { impl->library.load(path, mode); });
  } catch (const std::exception& e) {
    // The usual causes need different fixes: name the one dlerror points at.
    throw PluginLoadError(detail::load_failure_message(file, e.what()));
  }
  if (!impl->library.has(TP_ENTRY_SYMBOL))
    throw PluginLoadError(file + " is not a torchhost plugin: it does not export the symbol `" TP_ENTRY_SYMBOL
                          "`. Define it with TP_DEFINE_PLUGIN (C++) or `TP_EXPORT const tp_plugin_entry_t "
                          "tp_entry` (C) and build with torchhost_add_plugin.");
  std::shared_ptr<PluginLibrary> lib(new PluginLibrary(path, std::move(impl)));
  const auto& raw = lib->impl_->library.get<const tp_plugin_entry_t>(TP_ENTRY_SYMBOL);
  // `abi` sits at offset 4 in every version of the entry table: negotiate before judging the size,
  // so a plugin for another major is reported as such, not as corrupt.
  lib->entry_.abi = raw.abi;
  lib->negotiate();
  if (raw.struct_size < offsetof(tp_plugin_entry_t, get_interface) + sizeof(raw.get_interface))
    throw PluginLoadError(file + ": tp_entry.struct_size is " + std::to_string(raw.struct_size) +
                          ", smaller than any ABI 1 entry table (" + std::to_string(sizeof(tp_plugin_entry_t)) +
                          "); the plugin is corrupt or not built with the torchhost headers.");
  lib->entry_ = detail::sized_copy<tp_plugin_entry_t>(&raw);
  lib->host_ = host.table();
  lib->check_fingerprint();
  const tp_plugin_entry_t& e = lib->entry_;
  if (e.init == nullptr || e.descriptor_count == nullptr || e.descriptor_at == nullptr || e.get_interface == nullptr)
    throw PluginLoadError(file + ": tp_entry lacks a required function (init, descriptor_count, descriptor_at "
                          "or get_interface is NULL).");
  lib->name_ = e.name != nullptr ? e.name : path.stem().string();
  HostServices::take_last_error();
  const tp_status status = in_plugin_call(file.c_str(), "init", [&] { return e.init(host.table()); });
  if (status != TP_OK)
  {
    std::string message = HostServices::take_last_error();
    throw PluginLoadError("plugin " + file + ": init() failed with " + status_name(status) + ": " +
                          (message.empty() ? "(the plugin gave no message)" : message));
  }
  lib->initialised_ = true;
  lib->read_descriptors();
  return lib;
}

void PluginLibrary::negotiate() {
  const tp_version_t host_abi = TP_ABI_VERSION_INIT;
  if (tp_abi_is_compatible(host_abi, entry_.abi)) return;
  const std::string file = path_.string();
  if (entry_.abi.major != host_abi.major)
    throw PluginLoadError("plugin " + file + " was built for plugin ABI " + version_text(entry_.abi) +
                          ", but this host implements ABI " + version_text(host_abi) +
                          " and major versions must match. Rebuild the plugin against this host's plugin_api.");
  throw PluginLoadError("plugin " + file + " was built for plugin ABI " + version_text(entry_.abi) +
                        ", newer than this host's ABI " + version_text(host_abi) +
                        ". Upgrade torchhost, or rebuild the plugin against plugin_api " + version_text(host_abi) + ".");
}

void PluginLibrary::check_fingerprint() const {
  const std::string file = path_.string();
  if (entry_.build == nullptr)
    throw PluginLoadError("plugin " + file + ": tp_entry.build is NULL; use TP_STABLE_BUILD_INFO_INIT or "
                          "TP_TORCH_BUILD_INFO_INIT.");
  const tp_build_info_t build = detail::sized_copy<tp_build_info_t>(entry_.build);
  if (build.torch_version == nullptr) return; // Tier S library: no LibTorch coupling
  const BuildFingerprint mine = BuildFingerprint::host();
  const BuildFingerprint theirs{build.torch_version, build.cxx11_abi, build.device_build};
  if (theirs.torch_version != mine.torch_version || theirs.cxx11_abi != mine.cxx11_abi ||
      theirs.device_build != mine.device_build)
    throw PluginLoadError("plugin " + file + " holds Tier T components built for " + theirs.describe() +
                          ", but this host runs " + mine.describe() +
                          ". Tier T plugins share C++ types with the host, so they must be rebuilt against the "
                          "same LibTorch (point CMAKE_PREFIX_PATH at the host's LibTorch).");
}

void PluginLibrary::read_descriptors() {
  const std::string file = path_.string();
  const bool torch_coupled = detail::sized_copy<tp_build_info_t>(entry_.build).torch_version != nullptr;
  const uint32_t count = entry_.descriptor_count();
  for (uint32_t i = 0; i < count; ++i) {
    const tp_descriptor_t* raw = entry_.descriptor_at(i);
    if (raw == nullptr)
      throw PluginLoadError(file + ": descriptor_at(" + std::to_string(i) + ") returned NULL but descriptor_count() is " +
                            std::to_string(count) + ".");
    if (raw->struct_size < offsetof(tp_descriptor_t, flags) + sizeof(raw->flags))
      throw PluginLoadError(file + ": descriptor " + std::to_string(i) + " has struct_size " +
                            std::to_string(raw->struct_size) + ", smaller than an ABI 1 descriptor.");
    const tp_descriptor_t d = detail::sized_copy<tp_descriptor_t>(raw);
    ComponentInfo info;
    info.id = d.id != nullptr ? d.id : "";
    const std::string where = file + ": component '" + info.id + "'";
    if (!is_component_id(info.id))
      throw PluginLoadError(where + ": the id must be a reverse-DNS name such as org.example.my_model.");
    info.kind = d.kind;
    info.tier = d.tier;
    if (interface_id_for_kind(d.kind) == nullptr)
      throw PluginLoadError(where + ": unknown kind " + std::to_string(d.kind) + ".");
    const int32_t expected_tier =
        (d.kind == TP_KIND_DATASET || d.kind == TP_KIND_CALLBACK) ? TP_TIER_S : TP_TIER_T;
    if (d.tier != expected_tier)
      throw PluginLoadError(where + ": a " + kind_name(d.kind) + " must declare tier " +
                            (expected_tier == TP_TIER_S ? "S" : "T") + ".");
    if (d.tier == TP_TIER_T && !torch_coupled)
      throw PluginLoadError(where + " is Tier T but the library's build info names no LibTorch; use "
                            "TP_TORCH_BUILD_INFO_INIT so the host can check the fingerprint.");
    // Printed by plugins list, recorded in checkpoints and named in warnings: one line, no ESC.
    info.version = d.version != nullptr ? escape_control_characters(d.version, false) : "";
    info.description = d.description != nullptr ? escape_control_characters(d.description, false) : "";
    if (info.version.empty()) throw PluginLoadError(where + ": version is empty.");
    try {
      info.schema = plugin_schema(d.keys, d.key_count, info.id);
      // Printed by plugins list --verbose and in configuration errors: one line, no ESC.
      for (KeySpec& key : info.schema) key.help = escape_control_characters(key.help, false);
    } catch (const PluginLoadError& e) {
      throw PluginLoadError(file + ": " + e.what());
    }
    // Step by the plugin's own struct_size: a plugin built against a longer or shorter
    // tp_example_input_t lays its array out with that stride, not with ours.
    const uint32_t stride = d.examples != nullptr && d.example_count > 0 ? d.examples[0].struct_size : 0;
    if (d.example_count > 0 && d.examples != nullptr && stride < offsetof(tp_example_input_t, class_count) + sizeof(int64_t))
      throw PluginLoadError(where + ": example inputs have struct_size " + std::to_string(stride) +
                            ", smaller than an ABI 1 tp_example_input_t.");
    for (uint32_t k = 0; k < d.example_count && d.examples != nullptr; ++k) {
      const auto* raw_example = reinterpret_cast<const char*>(d.examples) + std::size_t(k) * stride;
      const tp_example_input_t example = detail::sized_copy<tp_example_input_t>(raw_example);
      if (example.name == nullptr || example.ndim < 0 || example.ndim > 8)
        throw PluginLoadError(where + ": example input " + std::to_string(k) + " has no name or ndim outside 0..8.");
      info.examples.push_back(example);
    }
    info.flags = d.flags;
    info.interface_table = entry_.get_interface(d.id, interface_id_for_kind(d.kind));
    check_interface_table(info, file);
    components_.push_back(std::move(info));
  }
}

}  // namespace tp
