// The checks and warnings of Model::open (model.cpp) that read no model state: the device, the
// thread count, which components the plugin directories provide, and the plugin files' hashes.
#include "open_checks.h"

#include <ATen/Context.h>

#include <algorithm>
#include <optional>
#include <set>

#include "tp/framework/util/sha256.h"

namespace tp::infer::detail {

c10::Device device_of(const std::string& name) {
  std::optional<c10::Device> device;
  try {
    device = c10::Device(name);
  } catch (const c10::Error&) {
  }
  if (!device || !(device->is_cpu() || device->is_cuda()))
    throw Error("tp::infer: device '" + name + "' is not a device this library runs on; give \"cpu\", \"cuda\" or "
                "\"cuda:N\".", Error::Kind::BadInput);
  if (device->is_cuda() && !(at::hasCUDA() && at::getNumGPUs() > 0))
    throw Error("tp::infer: device '" + name + "' asks for CUDA, but this LibTorch has no CUDA or no GPU is "
                "visible; give \"cpu\", or use a CUDA build on a machine with a GPU.", Error::Kind::Setup);
  if (device->is_cuda() && device->has_index() && static_cast<std::size_t>(device->index()) >= at::getNumGPUs())
    throw Error("tp::infer: device '" + name + "' does not exist: " + std::to_string(at::getNumGPUs()) +
                " GPU(s) are visible.", Error::Kind::Setup);
  return *device;
}

void check_threads(int threads) {
  // A typo's count (100000) was taken, and every later call failed with oneDNN's "could not create
  // a primitive", naming nothing about threads: refused here, as the host refuses run.threads.
  if (threads < 0 || threads >= 1024)
    throw Error("tp::infer: threads is " + std::to_string(threads) +
                "; give 0 (LibTorch's count) or a count below 1024, usually the cores this model may use.",
                Error::Kind::BadInput);
}

bool provides(const std::vector<ComponentEntry>& loaded, const std::string& id) {
  return std::any_of(loaded.begin(), loaded.end(), [&](const ComponentEntry& entry) { return entry.info->id == id; });
}

std::string searched_dirs(const OpenOptions& options) {
  std::string searched;
  for (const std::string& dir : options.plugin_dirs) searched += (searched.empty() ? "" : ", ") + dir;
  return searched;
}

void warn_about_plugins(Logger& log, const std::vector<ComponentEntry>& loaded, const std::string& model,
                        const std::string& preprocessing, bool preprocessing_loaded,
                        const std::vector<ExportedPluginFile>& trained_files, const std::string& export_file,
                        const std::string& searched) {
  std::set<std::string> hashed;
  for (const ComponentEntry& entry : loaded) {
    const bool used = entry.info->id == model || entry.info->id == preprocessing;
    const std::string library = entry.library->path().filename().string();
    if (!used || !hashed.insert(library).second) continue;
    for (const ExportedPluginFile& trained : trained_files) {
      if (trained.library != library) continue;
      const std::string now = sha256_file(entry.library->path());
      if (now != trained.sha256)
        log.write(tp::LogLevel::Warning, "tp::infer", "the plugin " + entry.library->path().string() + " (" + entry.info->id + ") is not the "
                 "file the export '" + export_file + "' was trained with: SHA-256 " + trained.sha256.substr(0, 12) +
                 "... then, " + now.substr(0, 12) + "... now. If its code changed, the network or the "
                 "preprocessing may differ from the training's while the weights still load; use the plugin build "
                 "the run used, or compare a few answers with `host predict`.");
    }
  }
  if (!preprocessing_loaded)
    log.write(tp::LogLevel::Warning, "tp::infer", "the export '" + export_file + "' reads images with '" + preprocessing +
             "', which no library in the plugin directories (" + searched + ") provides: run_files and "
             "run_encoded will fail until its plugin is there (the export's torchhost.plugin_files names its file); "
             "run_tensor needs none.");
}

}  // namespace tp::infer::detail
