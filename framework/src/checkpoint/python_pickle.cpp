#include "python_pickle.h"

#include <ATen/core/ivalue.h>

#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pickle_walk.h"
#include "tp/framework/error.h"
#include "tp/framework/util/bounded_text.h"

namespace tp {
namespace {

// What the rewrite knows of a value on the unpickler's stack.
enum class Kind : uint8_t {
  kKey,               // str, int, float, bool: a key LibTorch's dict can hash
  kDict,              // a dict LibTorch builds
  kOrderedDict,       // a dict made from OrderedDict(): its BUILD state goes under kOrderedDictStateKey
  kList,              // a list LibTorch builds
  kOther,             // None, tuples, tensors, storages: LibTorch reads them; never a dict key here
  kCallable,          // a global LibTorch maps itself (a tensor's rebuild function, torch.device)
  kOrderedDictClass,  // collections.OrderedDict
  kOpaque,            // an unknown global and whatever is called, built or filled from it
};

// The globals LibTorch's unpickler maps itself (torch/csrc/jit/serialization/unpickler.cpp,
// readGlobal), which therefore pass through; any other is an object LibTorch cannot build.
// torch._tensor._rebuild_from_type_v2 is left out: LibTorch reads the next two globals after it
// in its own way, which the replacement of the second (its class) by None would break.
std::optional<Kind> known_global(std::string_view module, std::string_view name) {
  if (module == "torch._utils" &&
      (name == "_rebuild_tensor_v2" || name == "_rebuild_qtensor" || name == "_rebuild_sparse_tensor"))
    return Kind::kCallable;
  if (module == "torch.jit._pickle") return Kind::kCallable;  // LibTorch's own lists and type tags
  if (module == "torch") {
    if (name == "device") return Kind::kCallable;
    if (name.ends_with("Storage") || name.starts_with("per_")) return Kind::kOther;  // dtype, qscheme
  }
  return std::nullopt;
}

// BININT of kOrderedDictStateKey: the opcode, then the int32 little-endian.
std::string state_key_opcode() {
  std::string out(1, 'J');
  const auto key = static_cast<uint32_t>(static_cast<int32_t>(kOrderedDictStateKey));
  for (int i = 0; i < 4; ++i) out += static_cast<char>((key >> (8 * i)) & 0xff);
  return out;
}

class Rewrite {
 public:
  explicit Rewrite(std::string_view pickle) : p_(pickle) {}

  std::string run() {
    tokenize();
    for (std::size_t k = 0; k < ops_.size(); ++k) k = step(k);
    std::string out;
    out.reserve(p_.size() + 64);
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      if (const auto before = inserted_.find(i); before != inserted_.end()) out += before->second;
      const Piece& piece = pieces_[i];
      out.append(piece.own ? std::string_view(extra_) : p_, piece.begin, piece.end - piece.begin);
    }
    return out;
  }

 private:
  struct Piece {  // one opcode of the output: bytes of the pickle, or of extra_ when `own`
    std::size_t begin, end;
    bool own;
  };
  struct Slot {  // a stack entry: its value and the piece its making began at
    std::size_t value, start;
  };
  struct Mark {
    std::size_t depth, piece;
  };

  void tokenize() {
    // About 70 bytes of bookkeeping per opcode: a pickle of one-byte opcodes must not cost
    // gigabytes before it is refused (review of 0c192b6). A state_dict with its optimizer state
    // takes some twenty opcodes a tensor; 2^22 is far past any checkpoint's.
    constexpr std::size_t kMaxOpcodes = std::size_t{1} << 22;
    const PickleWalkEnd end = walk_pickle(p_, PickleOpcodes::kProtocol2, [&](const PickleOp& op) {
      if (ops_.size() == kMaxOpcodes)
        throw Error(detail::concat("the pickle holds more than ", kMaxOpcodes, " opcodes (", p_.size(),
                                   " bytes), far past a checkpoint's; torchhost reads no larger one. Save the weights "
                                   "alone: torch.save(checkpoint[\"state_dict\"], \"weights.pt\")"));
      ops_.push_back(op);
      return true;
    });
    switch (end.kind) {
      case PickleWalkEnd::kDone: return;
      case PickleWalkEnd::kUnknownOpcode:
        throw Error(detail::concat("the pickle uses opcode 0x", std::hex, end.value, " at byte ", std::dec, end.at,
                           ", which torchhost's reader does not read: it reads pickle protocol 2, what torch.save "
                           "writes unless given another pickle_protocol"));
      case PickleWalkEnd::kForgedMemo:
        // The memo table grows to the id, as LibTorch's does: a forged id would cost gigabytes
        // before either noticed.
        throw Error(detail::concat("the pickle stores memo entry ", end.value, " at byte ", end.at, ", which no pickler writes"));
      case PickleWalkEnd::kTruncated:
      case PickleWalkEnd::kLengthPastEnd:
      case PickleWalkEnd::kUnterminatedGlobal:
        break;
    }
    throw Error("truncated pickle");
  }

  [[noreturn]] static void malformed(const char* what) { throw Error(std::string("malformed pickle: ") + what); }

  // Output.
  void keep(const PickleOp& op) { pieces_.push_back({op.begin, op.end, false}); }
  void emit(std::string_view bytes) {
    pieces_.push_back({extra_.size(), extra_.size() + bytes.size(), true});
    extra_ += bytes;
  }
  // Bytes LibTorch reads before the piece `at`; the latest insertion there goes first, since it
  // belongs to a value that encloses what earlier insertions there belong to.
  void insert_before(std::size_t at, std::string_view bytes) { inserted_[at].insert(0, bytes); }

  // The simulated stack.
  std::size_t push(Kind kind, std::size_t start) {
    kinds_.push_back(kind);
    stack_.push_back({kinds_.size() - 1, start});
    return kinds_.size() - 1;
  }
  Kind kind_at(std::size_t depth_from_top) const { return kinds_[stack_[stack_.size() - 1 - depth_from_top].value]; }
  void need(std::size_t n) const {
    if (stack_.size() < n) malformed("stack underflow");
  }
  // Pops `n` (at least 1) values; returns the piece the lowest began at.
  std::size_t pop(std::size_t n) {
    need(n);
    const std::size_t start = stack_[stack_.size() - n].start;
    stack_.resize(stack_.size() - n);
    return start;
  }
  Mark pop_mark() {
    if (marks_.empty() || marks_.back().depth > stack_.size()) malformed("no MARK");
    const Mark mark = marks_.back();
    marks_.pop_back();
    return mark;
  }
  bool keys_hashable(std::size_t from) const {  // stack_[from], stack_[from + 2], ...: dict keys
    if ((stack_.size() - from) % 2 != 0) return false;
    for (std::size_t i = from; i < stack_.size(); i += 2)
      if (kinds_[stack_[i].value] != Kind::kKey) return false;
    return true;
  }
  static bool is_dict(Kind kind) { return kind == Kind::kDict || kind == Kind::kOrderedDict; }

  // The top `n` values become one opaque tuple (the container below them marked opaque too when
  // `container` is set): how an object LibTorch cannot build, or one that could not take what is
  // put into it, is stepped over.
  void opaque_tuple(std::size_t n, bool container = false) {
    need(n);
    if (container) kinds_[stack_[stack_.size() - n].value] = Kind::kOpaque;
    emit(n == 2 ? "\x86" : "\x87");  // TUPLE2, TUPLE3
    push(Kind::kOpaque, pop(n));
  }

  std::size_t memo_value(uint64_t id) const {
    const auto it = memo_.find(id);
    if (it == memo_.end()) malformed("a memo entry is read before it is stored");
    return it->second;
  }

  // collections.OrderedDict() at ops_[k] (the class, from its GLOBAL or a memo read) becomes an
  // empty dict; Python writes it as the class, maybe a memo store of it, EMPTY_TUPLE, REDUCE.
  std::size_t ordered_dict(std::size_t k, bool from_global) {
    std::size_t j = k + 1;
    if (from_global && j < ops_.size() && (ops_[j].code == 'q' || ops_[j].code == 'r')) {
      kinds_.push_back(Kind::kOrderedDictClass);
      memo_[ops_[j++].arg] = kinds_.size() - 1;
    }
    if (j + 1 >= ops_.size() || ops_[j].code != ')' || ops_[j + 1].code != 'R')
      throw Error("the pickle uses collections.OrderedDict other than as OrderedDict()");
    emit("}");
    push(Kind::kOrderedDict, pieces_.size() - 1);
    return j + 1;
  }

  // Rewrites ops_[k]; returns the index of the last op it consumed.
  std::size_t step(std::size_t k) {
    const PickleOp& op = ops_[k];
    const std::size_t here = pieces_.size();  // the piece this op's output begins at
    switch (op.code) {
      case 0x80: case '.': keep(op); break;  // PROTO, STOP
      case '(': marks_.push_back({stack_.size(), here}); keep(op); break;
      case 'N': case ')': keep(op); push(Kind::kOther, here); break;
      case 0x88: case 0x89: case 'K': case 'M': case 'J': case 'G': case 'X': keep(op); push(Kind::kKey, here); break;
      case 0x8a: long1(op); break;
      case 0x8b: emit("N"); push(Kind::kOpaque, here); break;  // LONG4: beyond LibTorch's int64
      case 0x85: case 0x86: case 0x87: keep(op); push(Kind::kOther, pop(op.code - 0x84u)); break;  // TUPLE1-3
      case 't': { const Mark m = pop_mark(); stack_.resize(m.depth); keep(op); push(Kind::kOther, m.piece); break; }
      case ']': keep(op); push(Kind::kList, here); break;
      case 'l': { const Mark m = pop_mark(); stack_.resize(m.depth); keep(op); push(Kind::kList, m.piece); break; }
      case '}': keep(op); push(Kind::kDict, here); break;
      case 'd': {
        const Mark m = pop_mark();
        const bool dict = keys_hashable(m.depth);
        stack_.resize(m.depth);
        dict ? keep(op) : emit("t");
        push(dict ? Kind::kDict : Kind::kOpaque, m.piece);
        break;
      }
      case 'a':  // APPEND: LibTorch has only APPENDS, so a MARK goes before the item
        need(2);
        if (kind_at(1) != Kind::kList) {
          opaque_tuple(2, true);
          break;
        }
        insert_before(stack_.back().start, "(");
        emit("e");
        pop(1);
        break;
      case 'e': case 'u': {  // APPENDS, SETITEMS
        const Mark m = pop_mark();
        if (m.depth == 0) malformed("APPENDS or SETITEMS without a container");
        const Kind target = kinds_[stack_[m.depth - 1].value];
        if (op.code == 'e' ? target == Kind::kList : is_dict(target) && keys_hashable(m.depth)) {
          stack_.resize(m.depth);
          keep(op);
          break;
        }
        stack_.resize(m.depth);
        emit("t");
        push(Kind::kOpaque, m.piece);
        opaque_tuple(2, true);
        break;
      }
      case 's':  // SETITEM
        need(3);
        if (is_dict(kind_at(2)) && kind_at(1) == Kind::kKey) {
          keep(op);
          pop(2);
        } else {
          opaque_tuple(3, true);
        }
        break;
      case 'q': case 'r':  // BINPUT
        need(1);
        memo_[op.arg] = stack_.back().value;
        keep(op);
        break;
      case 'h': case 'j': {  // BINGET
        const std::size_t value = memo_value(op.arg);
        if (kinds_[value] == Kind::kOrderedDictClass) return ordered_dict(k, false);
        keep(op);
        stack_.push_back({value, here});
        break;
      }
      case 'c': return global(k);
      case 'R':  // REDUCE: only LibTorch's own functions are called
        need(2);
        if (kind_at(1) != Kind::kCallable) {
          opaque_tuple(2);
          break;
        }
        keep(op);
        push(Kind::kOther, pop(2));
        break;
      case 0x81: opaque_tuple(2); break;  // NEWOBJ: an instance of a class LibTorch does not know
      case 'b':                           // BUILD
        need(2);
        if (kind_at(1) != Kind::kOrderedDict) {
          opaque_tuple(2, true);
          break;
        }
        insert_before(stack_.back().start, state_key_opcode());  // then SETITEM puts the state under it
        emit("s");
        pop(1);
        break;
      case 'Q': keep(op); push(Kind::kOther, pop(1)); break;  // BINPERSID: a storage
      default: malformed("unexpected opcode");
    }
    return k;
  }

  // LONG1 of 0-8 bytes becomes the 8-byte LONG1 LibTorch reads; a longer one is opaque.
  void long1(const PickleOp& op) {
    const std::size_t here = pieces_.size();
    if (op.arg > 8) {
      emit("N");
      push(Kind::kOpaque, here);
      return;
    }
    const std::size_t first = op.end - op.arg;
    const bool negative = op.arg > 0 && (static_cast<unsigned char>(p_[op.end - 1]) & 0x80) != 0;
    std::string bytes("\x8a\x08", 2);
    bytes.append(p_.substr(first, op.arg));
    bytes.append(8 - op.arg, negative ? '\xff' : '\0');
    emit(bytes);
    push(Kind::kKey, here);
  }

  std::size_t global(std::size_t k) {
    const PickleOp& op = ops_[k];
    const std::string_view text = p_.substr(op.begin + 1, op.end - op.begin - 1);  // "module\nname\n"
    const std::size_t newline = text.find('\n');
    const std::string_view module = text.substr(0, newline), name = text.substr(newline + 1, text.size() - newline - 2);
    if (module == "collections" && name == "OrderedDict") return ordered_dict(k, true);
    const std::size_t here = pieces_.size();
    if (const auto kind = known_global(module, name)) {
      keep(op);
      push(*kind, here);
    } else {
      emit("N");
      push(Kind::kOpaque, here);
    }
    return k;
  }

  std::string_view p_;
  std::vector<PickleOp> ops_;
  std::vector<Piece> pieces_;
  std::string extra_;
  std::unordered_map<std::size_t, std::string> inserted_;
  std::vector<Kind> kinds_;  // by value: shared by the stack and the memo, so one change reaches both
  std::vector<Slot> stack_;
  std::vector<Mark> marks_;
  std::unordered_map<uint64_t, std::size_t> memo_;
};

}  // namespace

std::string readable_pickle(std::string_view pickle) { return Rewrite(pickle).run(); }

std::optional<NamedWeights> tensor_entries(const c10::IValue& value) {
  if (!value.isGenericDict()) return std::nullopt;
  NamedWeights out;
  for (const auto& item : value.toGenericDict()) {
    if (item.key().isInt() && item.key().toInt() == kOrderedDictStateKey) continue;
    if (!item.key().isString() || !item.value().isTensor()) return std::nullopt;
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

std::string top_level_keys(const c10::IValue& value) {
  std::string keys;
  if (!value.isGenericDict()) return keys;
  int shown = 0;
  for (const auto& item : value.toGenericDict())
    if (item.key().isString() && shown++ < 8)
      keys += (keys.empty() ? "" : ", ") + escape_control_characters(item.key().toStringRef().substr(0, 60), false);
  return keys;
}

}  // namespace tp
