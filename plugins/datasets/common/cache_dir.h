// The per-user directory where the datasets keep what they derive from their data once per node
// (image_folder's listing cache, webdataset's shard index cache): $XDG_CACHE_HOME/torchhost or
// ~/.cache/torchhost, created 0700, refused when another user owns it or anyone may write to it.
//
// Why so strict: a cache file chooses what a dataset reads (which files, which byte ranges, which
// labels), so whoever can write the directory can choose the training data. The readers check
// every file as untrusted input too (docs/hardening.md, section 11); this keeps other users out
// of the default location in the first place, and a directory others can write is neither
// written nor read.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace tp::datasets {

/// Who asks for the directory, for the messages: "<component>: refusing the <cache> directory
/// ... since <planted>".
struct CacheOwner {
  const char* component;  ///< "image_folder"
  const char* cache;      ///< "listing cache"
  const char* planted;    ///< what a planted file could do: "a planted listing would choose ..."
};

/// The per-user cache directory: $XDG_CACHE_HOME/torchhost when that is an absolute path, else
/// $HOME/.cache/torchhost, else <the user's home from the password database>/.cache/torchhost;
/// never a shared directory such as /tmp. Created with mode 0700 when missing. Throws Failure
/// (TP_ERR_CONFIG) naming it when it is not a directory owned by this user, or others may write
/// to it; (TP_ERR_IO) when it cannot be created or no home directory is known.
std::string user_cache_dir(const CacheOwner& owner);

/// Why this process does not write caches into `dir`, a `cache_dir` the config names.
struct WriteRefusal {
  /// "" when this process writes there: no other user can (it belongs to this user or root, and
  /// neither its group nor others may write it). Else the sentence that says why not.
  std::string reason;
  /// Whether the refusal is worth a warning: other users than its owner can write to it, so a
  /// cache there could be replaced or a link planted (the team set it up wrong, or never did).
  /// false: it is another user's directory that only its owner can write, a team's cache set up
  /// as docs/hardening.md section 15 says; it is read only for this user, which is worth an info
  /// line, not a warning.
  bool warn = false;
};

/// Whether this process may write caches into `dir`, a `cache_dir` the config names. A team may
/// share a directory that one user prepares: the others read it, checking every file as untrusted
/// input, but writing where another user can plant or swap files would let them choose the data.
/// The reason names the owner's uid and the mode, and says what to do only where something is
/// to be done (WriteRefusal::warn).
WriteRefusal shared_write_refusal(const std::string& dir);

/// The whole contents of the cache file `path` (read_regular_file's rules), when whoever could
/// have written it may choose what a dataset reads: its directory only its owner can write
/// (shared_write_refusal's `warn` is false), and the file belongs to this user, root or that
/// owner, and nobody else may write it. Nothing otherwise, and the caller scans: a cache file
/// lists which files a dataset opens and with which labels, and the reader can check that each
/// lies below the root, not that none was left out or relabelled (security trial F8).
std::optional<std::string> read_cache_file(const std::string& path, std::size_t max_bytes);

}  // namespace tp::datasets
