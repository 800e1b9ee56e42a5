// What the models open in one process share (docs/deployment.md, "Threads"). The dynamic loader
// keeps one copy of a plugin library per process, whatever path opens it, and a plugin's init
// keeps one host table that its deinit clears (tp/cpp/plugin.h, PLG-13): two models that each
// loaded and unloaded their plugins would take the host away from each other's. So every open
// model takes its libraries and its host table from one share, which the last model to close
// releases. The models also take turns for every call into a plugin (calls()), as `host` makes them
// one after another: no plugin's [main] function runs concurrently with another, and no dataset's
// create or destroy (the image plugins set OpenCV's process-wide thread count there) runs under
// another model's decoding. LibTorch's TF32 switches are process-wide too: the CUDA models agree
// on them here.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tp/infer/model.h"

namespace tp {
class HostServices;
class PluginLibrary;
}  // namespace tp

namespace tp::infer::detail {

/// One open model's membership of the process's share: joined on construction (the first member
/// creates the host table and its log, which goes where route_log said, else to stderr from
/// warnings up or from the level TORCHHOST_INFER_LOG_LEVEL names; throws Error for another
/// value), left on destruction (the last member unloads the libraries, then the host table). Any
/// thread; the share's own lock orders joining, loading and leaving.
class ProcessShare {
 public:
  /// tp::infer::set_log: the process's log from now on, for the share alive now and every later one.
  static void route_log(LogFunction function, LogLevel least);

  ProcessShare();
  ~ProcessShare();
  ProcessShare(const ProcessShare&) = delete;
  ProcessShare& operator=(const ProcessShare&) = delete;

  /// The host table every open model's plugins were initialised with; valid while this member lives.
  const HostServices& host() const;
  /// The plugin library at `file`, loaded and initialised the first time any open model asks for
  /// it: a file is the same library when its canonical path or its device and inode are, as the
  /// dynamic loader decides. Throws what PluginLibrary::load throws, and Error (Setup, naming the
  /// file and when the process loaded it) for a file this process loaded before whose device,
  /// inode, size or modification time differ now: the loader keeps the first build for the
  /// process's life and would run it again; a restart loads the new one.
  std::shared_ptr<PluginLibrary> load(const std::filesystem::path& file) const;
  /// The process's one turn for plugin calls: held by Model::open from its first plugin call, by
  /// each run_* call from its dataset's create to its answer, and while a Model is destroyed.
  /// Taken before the share's own lock, never after it.
  std::mutex& calls() const;
  /// LibTorch's intra-op thread count before anyone changed it (OMP_NUM_THREADS, else one per
  /// core): what OpenOptions::threads = 0 runs with. Read once per process, when the first model
  /// opens: at::set_num_threads also sets the count every new thread starts from, so after any
  /// model with a count of its own has run, "LibTorch's count" would be that model's (serving trial F1).
  int default_threads() const;
  /// The intra-op thread count a call that asks for `wanted` runs on: `wanted`, or 1 in a child
  /// forked after this process's first model opened (serving trial F7). GNU OpenMP's thread pool,
  /// which LibTorch starts for a model's first parallel work (open's weight copy included), does
  /// not survive fork: the child inherits the team's state without its threads, and its first
  /// parallel region with more than one thread waits for them forever. One thread runs no team.
  int call_threads(int wanted) const;
  /// Sets LibTorch's TF32 switches (cuDNN and cuBLAS) for a model on CUDA opened from
  /// `export_file`. Throws tp::infer::Error, naming both exports, when another open CUDA model
  /// runs with the other setting: the switches are one per process. Held until this member leaves.
  void use_cuda_tf32(bool tf32, const std::string& export_file);

 private:
  std::optional<bool> cuda_tf32_; ///< set once this member counts among the CUDA models
  std::string cuda_source_;       ///< its export, for another model's refusal
};

}  // namespace tp::infer::detail
