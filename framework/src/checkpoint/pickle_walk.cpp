#include "pickle_walk.h"

#include <cstring>

namespace tp {
namespace {

// How an opcode's argument is laid out.
struct Shape {
  enum Kind { kUnknown, kFixed, kMemoPut, kMemoGet, kPrefixed, kGlobal } kind;
  int bytes;  // kFixed, kMemoPut, kMemoGet: argument size; kPrefixed: size of the length prefix
};

// The protocol-2 opcodes Python's pickler writes, which python_pickle.cpp's stack simulation models.
Shape protocol2_shape(uint8_t code) {
  switch (code) {
    case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89: case 't': case 0x85: case 0x86:
    case 0x87: case 'e': case 'l': case 'd': case 'u': case '.': case 0x81: case 'b': case 'R': case 'Q': case 's':
    case 'a':  // APPEND: Python writes it for the last item of a list, so for every one-element list
      return {Shape::kFixed, 0};
    case 0x80: case 'K': return {Shape::kFixed, 1};  // PROTO, BININT1
    case 'M': return {Shape::kFixed, 2};              // BININT2
    case 'J': return {Shape::kFixed, 4};              // BININT
    case 'G': return {Shape::kFixed, 8};              // BINFLOAT
    case 'q': return {Shape::kMemoPut, 1};
    case 'r': return {Shape::kMemoPut, 4};
    case 'h': return {Shape::kMemoGet, 1};
    case 'j': return {Shape::kMemoGet, 4};
    case 0x8a: return {Shape::kPrefixed, 1};          // LONG1
    case 0x8b: return {Shape::kPrefixed, 4};          // LONG4: an int of more than 255 bytes
    case 'X': return {Shape::kPrefixed, 4};           // BINUNICODE
    case 'c': return {Shape::kGlobal, 0};             // GLOBAL: module and name, newline-terminated
    default: return {Shape::kUnknown, 0};
  }
}

// Every opcode of protocols 2-4, whether LibTorch reads it or not: a check must walk past
// anything LibTorch walks past (LIST 'l' and DICT 'd' were once missing, so the checkpoint check
// stopped at them and left what followed unchecked).
Shape any_shape(uint8_t code) {
  const Shape core = protocol2_shape(code);
  if (core.kind != Shape::kUnknown) return core;
  switch (code) {
    case 0x94: case '0': case '1': case '2': case 0x8f: case 0x90: case 0x91: case 0x92: case 0x93:
      return {Shape::kFixed, 0};
    case 0x95: return {Shape::kFixed, 8};  // FRAME
    case 0x8c: case 'C': case 'U': return {Shape::kPrefixed, 1};
    case 'B': case 'T': return {Shape::kPrefixed, 4};
    case 0x8d: case 0x8e: return {Shape::kPrefixed, 8};
    default: return {Shape::kUnknown, 0};
  }
}

}  // namespace

PickleWalkEnd walk_pickle(std::string_view pickle, PickleOpcodes opcodes,
                          const std::function<bool(const PickleOp&)>& on_op) {
  const auto* p = reinterpret_cast<const unsigned char*>(pickle.data());
  const std::size_t size = pickle.size();
  auto little = [&](std::size_t at, int bytes) {  // little-endian unsigned argument
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i) value = value << 8 | p[at + static_cast<std::size_t>(i)];
    return value;
  };
  std::size_t at = 0;
  while (at < size) {
    PickleOp op{p[at], at, 0, 0};
    const Shape shape = opcodes == PickleOpcodes::kAny ? any_shape(op.code) : protocol2_shape(op.code);
    at += 1;
    switch (shape.kind) {
      case Shape::kUnknown:
        return {PickleWalkEnd::kUnknownOpcode, op.begin, op.code, 0};
      case Shape::kFixed:
      case Shape::kMemoPut:
      case Shape::kMemoGet: {
        const auto bytes = static_cast<std::size_t>(shape.bytes);
        if (size - at < bytes) return {PickleWalkEnd::kTruncated, op.begin, op.code, 0};
        if (shape.kind != Shape::kFixed) op.arg = little(at, shape.bytes);
        if (shape.kind == Shape::kMemoPut && op.arg > at) return {PickleWalkEnd::kForgedMemo, at, op.arg, 0};
        at += bytes;
        break;
      }
      case Shape::kPrefixed: {
        const auto bytes = static_cast<std::size_t>(shape.bytes);
        if (size - at < bytes) return {PickleWalkEnd::kTruncated, op.begin, op.code, 0};
        op.arg = little(at, shape.bytes);
        at += bytes;
        if (op.arg > size - at) return {PickleWalkEnd::kLengthPastEnd, at, op.arg, size - at};
        at += static_cast<std::size_t>(op.arg);
        break;
      }
      case Shape::kGlobal:
        for (int line = 0; line < 2; ++line) {
          const void* newline = std::memchr(p + at, '\n', size - at);
          if (newline == nullptr) return {PickleWalkEnd::kUnterminatedGlobal, at, 0, size - at};
          at = static_cast<std::size_t>(static_cast<const unsigned char*>(newline) - p) + 1;
        }
        break;
    }
    op.end = at;
    if (!on_op(op)) break;
  }
  return {PickleWalkEnd::kDone, at, 0, 0};
}

}  // namespace tp
