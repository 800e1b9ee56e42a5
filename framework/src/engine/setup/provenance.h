// Provenance (docs/hardening.md, "Provenance"): what made a run, recorded in runtime.toml and in
// every checkpoint as a [provenance] TOML table, so a result can be traced to the exact host
// build, LibTorch, plugin binaries, the files components read through path keys, command line,
// machine and environment; and --resume can warn when a plugin binary or such a file changed since
// the checkpoint was written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/engine/run_components.h"

namespace tp {

/// One plugin library a run used.
struct PluginProvenance {
  std::string library;                 ///< file name, e.g. "resnet.so"
  std::string path;                    ///< the path it was loaded from
  std::string sha256;                  ///< of the file's bytes
  std::vector<std::string> components; ///< "id@version" of the components used from it
};

/// A regular file a component reads through a path key (TP_CFG_PATH, ABI 1.2): a teacher's
/// weights, a CSV split, an annotation file. Directories (a dataset root) and URIs are not
/// recorded: hashing a tree of images at every start would cost minutes.
struct InputFileProvenance {
  std::string key;       ///< the table's key path and the key, e.g. "model.teacher"
  std::string component; ///< the component id that declares the key
  std::string path;      ///< as resolved (absolute), URIs' user-info redacted
  int64_t size = 0;      ///< bytes
  std::string sha256;    ///< of the bytes; "" for a file over kMaxHashedInputBytes
  int64_t mtime_ns = 0;  ///< last modification, ns since the epoch: how a file too large to hash is told apart
};

/// Files up to this size are hashed (SHA-256 runs at roughly 0.5-2 GB/s on one core, so at most
/// about 2 s at each start and on each rank, next to the plugin hashes and the model's load); a
/// larger one is recorded by size and modification time only, which a copy or a rewrite changes
/// but an in-place edit keeping both does not.
inline constexpr int64_t kMaxHashedInputBytes = int64_t{1} << 30;

/// An earlier process that trained the same run (it saved the checkpoint a later process resumed
/// from, or one before it): what answers "which binaries and which command produced this model".
struct ProvenanceSegment {
  std::string started;      ///< UTC, ISO 8601, when that process collected its provenance
  std::string hostname;
  std::string host_version;
  std::string libtorch;
  std::string cuda;         ///< "" where that process had none
  std::string command_line; ///< as that process recorded it (URIs' user-info already redacted)
  /// The checkpoint's step and epoch that process resumed from (0 and 0 for the run's first
  /// process); -1 where its checkpoint predates this record and did not say.
  int64_t resumed_step = -1;
  int64_t resumed_epoch = -1;
  std::vector<std::pair<std::string, std::string>> plugins; ///< {library, sha256}
};

/// At most this many earlier segments are kept (the oldest go first): a run preempted hundreds of
/// times keeps small checkpoints (an entry is about 0.5-2 KB).
inline constexpr std::size_t kMaxEarlierSegments = 64;

/// What made a run.
struct Provenance {
  std::string host_version; ///< `git describe --always --dirty --tags` at build time
  std::string compiler;     ///< e.g. "GNU 12.2.0"
  std::string build_type;   ///< CMAKE_BUILD_TYPE
  std::string libtorch;     ///< TORCH_VERSION
  std::string cuda;         ///< CUDA runtime version, "" for a CPU build or without a GPU
  std::string cudnn;        ///< cuDNN version, "" when not available
  std::string nccl;         ///< the NCCL headers' version the host was built with, "" without NCCL
  std::vector<PluginProvenance> plugins;
  std::vector<InputFileProvenance> input_files; ///< the components' path-key files, in table order
  std::string command_line; ///< /proc/self/cmdline, arguments shell-quoted, URIs without user-info
  std::string hostname;
  std::string started;      ///< UTC, ISO 8601, when collected
  /// Environment variables that change behaviour: OMP_NUM_THREADS, MKL_NUM_THREADS,
  /// CUDA_VISIBLE_DEVICES and every TP_*, MALLOC_*, NCCL_*, TORCH_*, GLOO_* variable, sorted;
  /// a value only where environment_value_recordable() says so (URIs without user-info), else
  /// kUnrecordedValue (secrets.h).
  std::vector<std::pair<std::string, std::string>> environment;
  /// The checkpoint's step and epoch this process resumed from; 0 and 0 for a run's first process.
  int64_t resumed_step = 0;
  int64_t resumed_epoch = 0;
  /// The earlier processes of this run, oldest first (with_earlier_segments); empty in a first one.
  std::vector<ProvenanceSegment> earlier;
  /// Earlier processes not in `earlier`: dropped beyond kMaxEarlierSegments, or a checkpoint's
  /// process that recorded no provenance.
  int64_t earlier_dropped = 0;
};

/// The build's part of the provenance alone (host_version to nccl; the rest empty): what
/// `host --version` prints.
Provenance build_provenance();

/// [main] Collects the provenance of a run whose components are `parts`, created from `config`
/// (their libraries are hashed: about 0.1 s per 50 MB; so are the regular files the components'
/// path keys name, collect_input_files). Throws tp::Error when a plugin file cannot be read.
Provenance collect_provenance(const RunComponents& parts, const RunConfig& config);

/// The regular files that the path keys (KeySpec::is_path) of the components of `parts` name in
/// their tables of `config` (resolved, absolute), each once per key: size, modification time and,
/// up to kMaxHashedInputBytes, SHA-256. Empty values, URIs, directories, missing and unreadable
/// paths are left out (a component that needs one fails on its own).
std::vector<InputFileProvenance> collect_input_files(const RunComponents& parts, const RunConfig& config);

/// `provenance` as TOML text: a [provenance] table with [provenance.environment], one
/// [[provenance.plugins]] per library and one [[provenance.earlier]] per earlier process (each
/// with its [[provenance.earlier.plugins]] {library, sha256}). Parses back with toml++.
std::string provenance_toml(const Provenance& provenance);

/// `now` (this process's provenance) with the run's earlier processes carried forward from
/// `recorded_toml`, the [provenance] text of the checkpoint it resumes from at `resumed_step` and
/// `resumed_epoch`: that checkpoint's own `earlier` list, then its top-level process as the newest
/// entry; a checkpoint from before this record (no `earlier`) gives its process alone. Beyond
/// `keep` entries the oldest are dropped and counted in earlier_dropped. A checkpoint without
/// provenance ("") or with unreadable text counts as one dropped process. The text may come
/// from anyone (hardening.md section 10): fields of another type are ignored, never fatal.
/// Example: resuming a checkpoint of the run's second process gives earlier = {first, second}.
Provenance with_earlier_segments(Provenance now, const std::string& recorded_toml, int64_t resumed_step,
                                 int64_t resumed_epoch, std::size_t keep = kMaxEarlierSegments);

/// A plugin library whose file changed since a checkpoint was written.
struct PluginChange {
  std::string library;                    ///< file name, e.g. "resnet.so"
  std::vector<std::string> component_ids; ///< the components this run uses from it
  /// "resnet.so (org.torchhost.resnet@1.0.0 -> 1.1.0, org.torchhost.vit@1.0.0): SHA-256
  /// 1a2b3c4d... when the checkpoint was written, 5e6f7a8b... now": each component's version
  /// when the checkpoint was written -> now, or its one version where that did not change.
  std::string text;
};

/// One warning paragraph per file `recorded_toml` (a checkpoint's provenance_toml text) lists
/// under [[provenance.input_files]] whose key in `now` names no file any more, or a file whose
/// SHA-256 (for a file too large to hash: size or modification time) differs: which component
/// and key, the file, what changed, what it means for an exact resume and what to do. A file that
/// moved with the same bytes is no change. Nothing for a checkpoint from before this record, or
/// unreadable text; recorded values are shown with control characters escaped.
std::vector<std::string> changed_input_files(const std::string& recorded_toml, const Provenance& now);

/// The plugins of `now` whose file hash differs from the one `recorded_toml` (a checkpoint's
/// provenance_toml text; "" = a checkpoint from before provenance) holds for the same library
/// file name. Libraries new or gone are not listed.
std::vector<PluginChange> changed_plugins(const std::string& recorded_toml, const Provenance& now);

}  // namespace tp
