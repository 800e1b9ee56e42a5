// ProcessShare (process_share.h): the share lives behind one lock in a process-wide object, the
// one piece of process state in the library, because what it guards (the loaded plugin copies and
// LibTorch's TF32 switches) is process state. Besides it, one fork handler, registered when the
// first model opens, marks a forked child: whether OpenMP's threads exist is process state too,
// and only a handler learns of a fork (LibTorch's OpenMP build registers none; PyTorch's
// DataLoader sets 1 thread in each forked worker for the same reason).
#include "process_share.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <pthread.h>
#include <sys/stat.h>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {
namespace {

/// A loaded library and the path it was loaded through, resolved.
struct LoadedLibrary {
  std::filesystem::path canonical;
  std::shared_ptr<PluginLibrary> library;
};

/// TORCHHOST_INFER_LOG_LEVEL: the least level of the lines the library and the plugins print.
tp::LogLevel log_level_from_environment() {
  const char* value = std::getenv("TORCHHOST_INFER_LOG_LEVEL");
  const std::string level = value != nullptr ? value : "";
  if (level.empty() || level == "warning") return tp::LogLevel::Warning;
  if (level == "error") return tp::LogLevel::Error;
  if (level == "info") return tp::LogLevel::Info;
  if (level == "debug") return tp::LogLevel::Debug;
  throw Error("tp::infer: the environment variable TORCHHOST_INFER_LOG_LEVEL is '" + level +
              "'; set it to debug, info, warning or error, or unset it (warning: only warnings and errors).",
              Error::Kind::Setup);
}

/// What the members share while at least one lives.
struct Shared {
  Shared(tp::LogLevel least, Logger::Sink sink) { logger.route(std::move(sink), least); }
  // The library's and the plugins' log lines, to stderr as in `host` (util/log.h) unless the
  // caller routed them (set_log), from the least level up; verbose: that level decides.
  Logger logger{0, true};
  HostServices host{logger, ProcessPlace{}};
  // After the host table: destroyed first, so every library's deinit runs while the table lives.
  std::vector<LoadedLibrary> libraries;
  std::vector<std::string> cuda_sources; ///< the exports of the open CUDA models, for messages
  bool cuda_tf32 = false;
};

/// What identifies the file a plugin library was loaded from: another build renamed over it
/// (another inode), or one written in place (another size or modification time), differs.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

/// A plugin file as this process loaded it first: the dynamic loader keeps that build mapped for
/// the process's life (RTLD_NODELETE, plugin_library.cpp) and hands it out again for the path.
struct LoadedFile {
  std::filesystem::path canonical;
  FileIdentity identity;
  std::string loaded_at; ///< local time, for the refusal
};

FileIdentity identity_of(const std::filesystem::path& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) return {}; // gone: PluginLibrary::load names it
  return {info.st_dev, info.st_ino, info.st_size,
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
}

std::string local_time_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  ::localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

struct Process {
  std::mutex calls; ///< ProcessShare::calls(); outside Shared so that a member's last call can hold it
  std::mutex lock;
  std::size_t members = 0;
  std::unique_ptr<Shared> shared;
  int default_threads = 0; ///< ProcessShare::default_threads(); 0 until the first member joins
  bool fork_handler = false; ///< mark_forked_child is registered (once: handlers cannot be removed)
  /// Set in a child forked after the handler's registration; atomic: the handler writes it
  /// without the lock, which the forking thread's parent may have held at the fork.
  std::atomic<bool> forked_child{false};
  /// Every plugin file loaded since the process began, kept past the last member: the loader
  /// keeps their code as long (serving trial F11).
  std::vector<LoadedFile> loaded_files;
  /// set_log's: where the log goes and from which level; no level until set_log was called (the
  /// environment's then).
  Logger::Sink log_sink;
  std::optional<tp::LogLevel> log_least;
};

/// The caller's function behind the framework's logger.
Logger::Sink sink_calling(LogFunction function) {
  if (!function) return {};
  return [function = std::move(function)](tp::LogLevel level, std::string_view source, std::string_view message) {
    function(static_cast<LogLevel>(static_cast<int>(level)), std::string(source), std::string(message));
  };
}

// Never destroyed: a model the caller keeps in a static object may close after this translation
// unit's statics are gone, and must still find the lock.
Process& process() {
  static Process* const instance = new Process;
  return *instance;
}

// pthread_atfork's child handler: only marks the child (a handler runs in the forking thread of
// a child whose other threads are gone: the less it does, the less it can deadlock on).
void mark_forked_child() { process().forked_child.store(true); }

}  // namespace

ProcessShare::ProcessShare() {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  if (p.members == 0)
    p.shared = std::make_unique<Shared>(p.log_least ? *p.log_least : log_level_from_environment(), p.log_sink);
  // From the environment and the cores, not from the current count, which a model's last call set.
  if (p.default_threads == 0) p.default_threads = std::max(1, at::intraop_default_num_threads());
  // Before this member's first LibTorch call: a process forked before any model opened keeps
  // every thread (the way to get them back in a pre-fork server: open in each child).
  if (!p.fork_handler) {
    if (::pthread_atfork(nullptr, nullptr, mark_forked_child) != 0)
      throw Error("tp::infer: cannot register the library's fork handler (pthread_atfork: out of memory).",
                  Error::Kind::OutOfMemory);
    p.fork_handler = true;
  }
  ++p.members;
}

ProcessShare::~ProcessShare() {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  if (cuda_tf32_) {
    std::vector<std::string>& sources = p.shared->cuda_sources;
    sources.erase(std::find(sources.begin(), sources.end(), cuda_source_));
  }
  // Under the lock: a model opening meanwhile must not load a library whose deinit is about to run.
  if (--p.members == 0) p.shared.reset();
}

void ProcessShare::route_log(LogFunction function, LogLevel least) {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  p.log_sink = sink_calling(std::move(function));
  p.log_least = static_cast<tp::LogLevel>(static_cast<int>(least));
  if (p.shared) p.shared->logger.route(p.log_sink, *p.log_least);
}

const HostServices& ProcessShare::host() const { return process().shared->host; }

std::mutex& ProcessShare::calls() const { return process().calls; }

int ProcessShare::default_threads() const {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  return p.default_threads;
}

int ProcessShare::call_threads(int wanted) const { return process().forked_child.load() ? 1 : wanted; }

std::shared_ptr<PluginLibrary> ProcessShare::load(const std::filesystem::path& file) const {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  LoadedLibrary wanted{std::filesystem::canonical(file), nullptr};
  // A new build renamed over a loaded one: dlopen would hand back the old build's code for the
  // path, while open's SHA-256 check hashes the new file (serving trial F11). Refused, naming it.
  const FileIdentity identity = identity_of(wanted.canonical);
  const auto first = std::find_if(p.loaded_files.begin(), p.loaded_files.end(),
                                  [&](const LoadedFile& loaded) { return loaded.canonical == wanted.canonical; });
  if (first != p.loaded_files.end() && first->identity != identity)
    throw Error("tp::infer: the plugin " + file.string() + " (" + wanted.canonical.string() + ") changed on disk since "
                "this process loaded it at " + first->loaded_at + " (another file, size or modification time): the "
                "process still runs the build it loaded then, whose code stays loaded for the process's life, and "
                "would run it for this model. Restart the process to load the new build.",
                Error::Kind::Setup);
  std::vector<LoadedLibrary>& libraries = p.shared->libraries;
  // The dynamic loader's identity: the same path, or the same device and inode (a hard link), as
  // Registry::load_file compares them.
  const auto same = std::find_if(libraries.begin(), libraries.end(), [&](const LoadedLibrary& loaded) {
    std::error_code unreadable;  // a file gone since: not the same
    return loaded.canonical == wanted.canonical ||
           std::filesystem::equivalent(loaded.canonical, wanted.canonical, unreadable);
  });
  if (same != libraries.end()) return same->library;
  wanted.library = PluginLibrary::load(file, p.shared->host);
  libraries.push_back(wanted);
  if (first == p.loaded_files.end()) p.loaded_files.push_back({wanted.canonical, identity, local_time_now()});
  return wanted.library;
}

void ProcessShare::use_cuda_tf32(bool tf32, const std::string& export_file) {
  Process& p = process();
  const std::lock_guard<std::mutex> held(p.lock);
  Shared& shared = *p.shared;
  std::vector<std::string>& sources = shared.cuda_sources;
  // The other open CUDA models: this member's own entry left out when it counts already.
  std::vector<std::string> others = sources;
  if (cuda_tf32_) others.erase(std::find(others.begin(), others.end(), cuda_source_));
  if (!others.empty() && shared.cuda_tf32 != tf32) {
    const auto setting = [](bool on) { return std::string(on ? "true" : "false"); };
    const std::string open = others.size() > 1 ? "the open models '" + others.front() + "' and " +
                                                     std::to_string(others.size() - 1) + " more run"
                                               : "the open model '" + others.front() + "' runs";
    throw Error("tp::infer: '" + export_file + "' asks for OpenOptions::tf32 = " + setting(tf32) + " on CUDA, but " +
                open + " on CUDA with tf32 = " +
                setting(shared.cuda_tf32) + ", and LibTorch's TF32 switches are one per process. Open every CUDA "
                "model with the same tf32, or close those first.",
                Error::Kind::Setup);
  }
  if (cuda_tf32_) sources.erase(std::find(sources.begin(), sources.end(), cuda_source_));
  sources.push_back(export_file);
  cuda_tf32_ = tf32;
  cuda_source_ = export_file;
  shared.cuda_tf32 = tf32;
  // LibTorch allows TF32 in cuDNN by default; host predict sets both switches from run.tf32.
  at::globalContext().setAllowTF32CuDNN(tf32);
  at::globalContext().setAllowTF32CuBLAS(tf32);
}

}  // namespace tp::infer::detail
