// ProcessShare (process_share.h): the share lives behind one lock in a process-wide object, the
// one piece of process state in the library, because what it guards (the loaded plugin copies and
// LibTorch's TF32 switches) is process state.
#include "process_share.h"

#include <ATen/Context.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {
namespace {

/// A loaded library and the identities the dynamic loader knows it by.
struct LoadedLibrary {
  std::filesystem::path canonical;
  dev_t device = 0;
  ino_t inode = 0;
  std::shared_ptr<PluginLibrary> library;
};

/// TORCHHOST_INFER_LOG_LEVEL: the least level of the lines the library and the plugins print.
LogLevel log_level_from_environment() {
  const char* value = std::getenv("TORCHHOST_INFER_LOG_LEVEL");
  const std::string level = value != nullptr ? value : "";
  if (level.empty() || level == "warning") return LogLevel::Warning;
  if (level == "error") return LogLevel::Error;
  if (level == "info") return LogLevel::Info;
  if (level == "debug") return LogLevel::Debug;
  throw Error("tp::infer: the environment variable TORCHHOST_INFER_LOG_LEVEL is '" + level +
              "'; set it to debug, info, warning or error, or unset it (warning: only warnings and errors).");
}

/// What the members share while at least one lives.
struct Shared {
  explicit Shared(LogLevel least) : logger(0, least == LogLevel::Debug) { logger.set_least_level(least); }
  // The plugins' log lines go to stderr, as in `host` (util/log.h), from `least` up.
  Logger logger;
  HostServices host{logger, ProcessPlace{}};
  // After the host table: destroyed first, so every library's deinit runs while the table lives.
  std::vector<LoadedLibrary> libraries;
  std::size_t cuda_models = 0;
  bool cuda_tf32 = false;
  std::string cuda_tf32_source; ///< the export of a CUDA model that set the switches, for messages
};

struct Process {
  std::mutex lock;
  std::size_t members = 0;
  std::unique_ptr<Shared> shared;
};

// Never destroyed: a model the caller keeps in a static object may close after this translation
// unit's statics are gone, and must still find the lock.
Process& process() {
  static Process* const instance = new Process;
  return *instance;
}

}  // namespace

ProcessShare::ProcessShare() {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  if (p.members == 0) p.shared = std::make_unique<Shared>(log_level_from_environment());
  ++p.members;
}

ProcessShare::~ProcessShare() {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  if (cuda_tf32_) --p.shared->cuda_models;
  // Under the lock: a model opening meanwhile must not load a library whose deinit is about to run.
  if (--p.members == 0) p.shared.reset();
}

const HostServices& ProcessShare::host() const { return process().shared->host; }

std::shared_ptr<PluginLibrary> ProcessShare::load(const std::filesystem::path& file) const {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  LoadedLibrary wanted{std::filesystem::canonical(file), 0, 0, nullptr};
  struct stat identity {};
  if (::stat(wanted.canonical.c_str(), &identity) == 0) {
    wanted.device = identity.st_dev;
    wanted.inode = identity.st_ino;
  }
  std::vector<LoadedLibrary>& libraries = p.shared->libraries;
  const auto same = std::find_if(libraries.begin(), libraries.end(), [&](const LoadedLibrary& loaded) {
    return loaded.canonical == wanted.canonical || (loaded.device == wanted.device && loaded.inode == wanted.inode);
  });
  if (same != libraries.end()) return same->library;
  wanted.library = PluginLibrary::load(file, p.shared->host);
  libraries.push_back(wanted);
  return wanted.library;
}

void ProcessShare::use_cuda_tf32(bool tf32, const std::string& export_file) {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  Shared& shared = *p.shared;
  const std::size_t others = shared.cuda_models - (cuda_tf32_ ? 1 : 0);
  if (others > 0 && shared.cuda_tf32 != tf32) {
    const auto setting = [](bool on) { return std::string(on ? "true" : "false"); };
    throw Error("tp::infer: '" + export_file + "' asks for OpenOptions::tf32 = " + setting(tf32) +
                " on CUDA, but the open model '" + shared.cuda_tf32_source + "' runs on CUDA with tf32 = " +
                setting(shared.cuda_tf32) + ", and LibTorch's TF32 switches are one per process. Open both with "
                "the same tf32, or close the other model first.");
  }
  if (!cuda_tf32_) ++shared.cuda_models;
  cuda_tf32_ = tf32;
  shared.cuda_tf32 = tf32;
  shared.cuda_tf32_source = export_file;
  // LibTorch allows TF32 in cuDNN by default; host predict sets both switches from run.tf32.
  at::globalContext().setAllowTF32CuDNN(tf32);
  at::globalContext().setAllowTF32CuBLAS(tf32);
}

}  // namespace tp::infer::detail
