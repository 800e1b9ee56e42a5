// The integrity layer of checkpoint files, with no LibTorch: a CRC-32C of the whole file stored in
// the zip archive's own comment field, and bounds checks of the zip structure, both run before a
// single byte reaches LibTorch's zip reader and unpickler.
//
// A torchhost checkpoint is a zip archive (PyTorch's format). Its end-of-central-directory record
// (EOCD, the archive's last 22 bytes) may carry a comment; a sealed checkpoint's comment is the
// 24 ASCII bytes "torchhost-crc32c:XXXXXXXX", the CRC-32C (hex) of every byte before the comment,
// the EOCD itself included (its comment-length field is set first). Zip readers, Python's
// torch.load included, ignore the comment, so the file stays an ordinary PyTorch checkpoint.
//
// Why it is needed: LibTorch's zip reader does not verify the zip's per-record CRC-32 (checked
// with torch 2.13: a flipped byte inside a tensor loads silently, in C++ and in torch.load), so a
// flipped bit would resume training from a wrong weight. Cost: one pass over the bytes as they are written at save, and over the file at load: 0.16 s of CPU per
// GB with SSE4.2's crc32 instruction (every x86-64 CPU since 2008; measured), 10-30x that with the
// portable byte table other CPUs use (docs/hardening.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tp/framework/error.h"
#include "tp/framework/util/crc32c.h" // crc32c(), the seal's checksum

namespace tp {

/// A checkpoint that cannot be used: missing, unreadable, truncated, damaged (checksum mismatch)
/// or not a torchhost checkpoint. The message names the file. `host` exits with 4.
class CheckpointError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return kExitCheckpoint; }
};

/// Where a checkpoint's bytes go, in order (a file being written, a buffer).
using CheckpointBytesSink = std::function<void(const char* bytes, std::size_t size)>;

/// Seals a zip archive while it is written, so a checkpoint streams to its file with no copy of
/// it in memory (user trial: building the whole file in a growing buffer first cost 2.2x
/// torch.save's time and 3x the file's size in peak memory). Every byte but the last 22 goes
/// straight on to `sink`, into the running CRC-32C; finish() takes the held-back 22 as the EOCD,
/// sets its comment length and sends it and the seal. The same bytes as sealing the whole
/// archive at once (seal_checkpoint).
class CheckpointSealer {
 public:
  explicit CheckpointSealer(CheckpointBytesSink sink) : sink_(std::move(sink)) {}
  /// The archive's next `size` bytes.
  void write(const char* bytes, std::size_t size);
  /// Ends the archive. Throws tp::Error when the bytes written do not end with an EOCD without a
  /// comment (a programming error: LibTorch's zip writer always ends so).
  void finish();

 private:
  void pass_on(const char* bytes, std::size_t size);
  CheckpointBytesSink sink_;
  std::vector<char> tail_; ///< the last bytes written (at most 22), not yet passed on
  uint32_t crc_ = 0;
};

/// Seals a finished zip archive in place (CheckpointSealer over the whole buffer). Throws
/// tp::Error when `zip` does not end with an EOCD without a comment.
void seal_checkpoint(std::vector<char>& zip);

/// What verify_checkpoint() found.
enum class SealState {
  kSealed, ///< checksum present and equal: the bytes are the ones written
  kLegacy  ///< a well-formed zip without a checksum (written before checkpoints were sealed)
};

/// One stored record of the archive: its name and where its bytes lie in the file.
struct ZipRecord {
  std::string name;
  std::size_t offset = 0;
  std::size_t size = 0;
};

/// Checks `bytes` (a whole checkpoint file, `name` for messages) without LibTorch: the seal if
/// present, and that the zip structure lies within the file (every central-directory entry and
/// its stored data in bounds, uncompressed, consistent sizes). Throws CheckpointError naming
/// `name` and the defect (empty, truncated, checksum mismatch, malformed archive). When `records`
/// is given, it receives the archive's records in directory order.
SealState verify_checkpoint(const char* bytes, std::size_t size, const std::string& name,
                            std::vector<ZipRecord>* records = nullptr);

}  // namespace tp
