// One walker over the opcodes of a pickle, shared by the two readers that look at a pickle
// before LibTorch's unpickler does: the checkpoint reader (checkpoint.cpp), which refuses lengths
// and memo ids that would make the unpickler allocate gigabytes, and the reader of Python's pickles
// (python_pickle.cpp), which rewrites torch.save's files at the opcode level for LibTorch.
// Both need the same decoding of each opcode's argument; only what they do with a problem
// differs, so the walker reports problems and the callers phrase them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace tp {

/// One opcode of a pickle.
struct PickleOp {
  uint8_t code;
  std::size_t begin, end;  ///< the opcode byte and its argument bytes: [begin, end)
  /// BINPUT/LONG_BINPUT/BINGET/LONG_BINGET: the memo id; a length-prefixed value: its length.
  uint64_t arg;
};

/// Which opcodes the walk decodes; any other ends it with kUnknownOpcode.
enum class PickleOpcodes {
  /// Every opcode of protocols 2-4 that LibTorch's pickler or Python's torch.save may write,
  /// whether LibTorch reads it or not.
  kAny,
  /// The protocol-2 opcodes Python's pickler writes (torch.save's default protocol), whose effect
  /// on the unpickler's stack python_pickle.cpp simulates; not POP, POP_MARK, DUP nor the
  /// extension-registry codes, which it writes only for recursive tuples and registered classes.
  kProtocol2,
};

/// How a walk ended.
struct PickleWalkEnd {
  enum Kind {
    kDone,               ///< every byte walked, or the callback asked to stop
    kUnknownOpcode,      ///< `at`: the opcode's offset; `value`: the opcode
    kTruncated,          ///< `at`: the opcode's offset; its fixed argument or length prefix is cut off
    kForgedMemo,         ///< `at`: the argument's offset; `value`: a BINPUT id no pickler reaches by then
    kLengthPastEnd,      ///< `at`: the value's first byte; `value`: its claimed length; `left`: bytes from `at`
    kUnterminatedGlobal, ///< `at`: the start of a GLOBAL line that has no newline
  };
  Kind kind;
  std::size_t at;
  uint64_t value;
  std::size_t left;
};

/// Walks `pickle` from its first byte, calling `on_op` for each opcode after decoding its
/// argument; `on_op` returns false to stop there (e.g. at STOP, '.'). Stops at the first problem
/// and says which; never reads past the end. A BINPUT id larger than the argument's offset is
/// reported as forged: a pickler numbers memo entries 0, 1, 2, ..., one per value written, so a
/// real id is never beyond the bytes before it. Cost: one pass, no allocation.
PickleWalkEnd walk_pickle(std::string_view pickle, PickleOpcodes opcodes,
                          const std::function<bool(const PickleOp&)>& on_op);

}  // namespace tp
