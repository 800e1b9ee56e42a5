#include "tp/framework/checkpoint/initial_weights.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

constexpr const char* kKey = "train.init_weights";

using detail::concat;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw ConfigError(kKey, std::string(kKey) + " = \"" + file.string() + "\": " + what);
}

// ~~~~ safetensors ~~~~
// The header is JSON: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
// "__metadata__": {...}}. This reads exactly that shape; anything else is skipped or refused.

class HeaderReader {
 public:
  explicit HeaderReader(const std::string& text) : s_(text) {}

  /// name -> (dtype, shape, offsets) for every tensor entry.
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape, offsets;
  };
  std::vector<std::pair<std::string, Entry>> entries() {
    std::vector<std::pair<std::string, Entry>> out;
    expect('{');
    for (bool more = !peek('}'); more; more = next_member('}')) {
      std::string name = string();
      expect(':');
      if (name == "__metadata__") {
        skip_value();
        continue;
      }
      Entry e;
      expect('{');
      for (bool field = !peek('}'); field; field = next_member('}')) {
        const std::string key = string();
        expect(':');
        if (key == "dtype") e.dtype = string();
        else if (key == "shape") e.shape = ints();
        else if (key == "data_offsets") e.offsets = ints();
        else skip_value();
      }
      out.emplace_back(std::move(name), std::move(e));
    }
    return out;
  }

 private:
  void space() { while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_; }
  bool peek(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!peek(c)) throw Error(std::string("malformed header: expected '") + c + "' at byte " + std::to_string(i_));
  }
  bool next_member(char close) {
    if (peek(',')) return true;
    expect(close);
    return false;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        c = s_[i_++];
        // Tensor names are plain ASCII in practice; \uXXXX outside ASCII is kept as its escape.
        if (c == 'u' && i_ + 4 <= s_.size()) {
          const long code = std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16);
          out += code < 0x80 ? std::string(1, static_cast<char>(code)) : "\\u" + s_.substr(i_, 4);
          i_ += 4;
          continue;
        }
        c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
      }
      out += c;
    }
    expect('"');
    return out;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> out;
    expect('[');
    for (bool more = !peek(']'); more; more = next_member(']')) {
      space();
      char* end = nullptr;
      out.push_back(std::strtoll(s_.c_str() + i_, &end, 10));
      if (end == s_.c_str() + i_) throw Error("malformed header: expected an integer at byte " + std::to_string(i_));
      i_ = static_cast<size_t>(end - s_.c_str());
    }
    return out;
  }
  void skip_value() {
    space();
    if (i_ < s_.size() && s_[i_] == '"') return void(string());
    if (peek('{')) {
      for (bool more = !peek('}'); more; more = next_member('}')) string(), expect(':'), skip_value();
      return;
    }
    if (peek('[')) {
      for (bool more = !peek(']'); more; more = next_member(']')) skip_value();
      return;
    }
    while (i_ < s_.size() && std::string_view(",}] \n\r\t").find(s_[i_]) == std::string_view::npos) ++i_;
  }

  const std::string& s_;
  size_t i_ = 0;
};

at::ScalarType safetensors_dtype(const std::string& code) {
  static const std::map<std::string, at::ScalarType> kCodes = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
      {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool}};
  const auto it = kCodes.find(code);
  if (it == kCodes.end()) throw Error("unsupported safetensors dtype \"" + code + "\"");
  return it->second;
}

Named read_safetensors(const std::vector<char>& bytes) {
  if (bytes.size() < 8) throw Error("shorter than the 8-byte header length");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_size > bytes.size() - 8) throw Error("its header length exceeds the file");
  const std::string header(bytes.data() + 8, header_size);
  const char* data = bytes.data() + 8 + header_size;
  const uint64_t data_size = bytes.size() - 8 - header_size;
  Named out;
  for (auto& [name, e] : HeaderReader(header).entries()) {
    const at::ScalarType dtype = safetensors_dtype(e.dtype);
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;
    const auto expected = static_cast<uint64_t>(numel) * c10::elementSize(dtype);
    if (e.offsets.size() != 2 || e.offsets[0] < 0 || e.offsets[1] < e.offsets[0] ||
        static_cast<uint64_t>(e.offsets[1]) > data_size ||
        static_cast<uint64_t>(e.offsets[1] - e.offsets[0]) != expected)
      throw Error("tensor '" + name + "' has data_offsets that do not fit its shape and the file");
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(dtype));
    std::memcpy(t.data_ptr(), data + e.offsets[0], expected);  // little-endian, as the format is
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
}

// ~~~~ pickles: host checkpoints and torch.save files ~~~~
// LibTorch's unpickler (behind torch::pickle_load) turns every collections.OrderedDict() into
// None, expecting them only as a tensor's empty backward hooks, and treats BUILD as a call; so
// the OrderedDict that model.state_dict() returns, with its _metadata attribute, does not load
// (pytorch#100741). The pickle is rewritten first, at the opcode level: OrderedDict() becomes an
// empty dict and a final BUILD (the _metadata) is cut off. Host checkpoints pass unchanged.

struct Op {
  uint8_t code;
  size_t begin, end;  // the opcode and its argument bytes
  uint32_t memo;      // BINGET/BINPUT index
};

// The opcodes of protocol 2 that LibTorch's unpickler reads, with their argument sizes.
std::vector<Op> tokenize(const std::string& p) {
  std::vector<Op> ops;
  size_t i = 0;
  auto arg = [&](size_t n) {  // little-endian unsigned argument of n bytes at i
    if (i + n > p.size()) throw Error("truncated pickle");
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i + k])) << (8 * k);
    return v;
  };
  while (i < p.size()) {
    Op op{static_cast<uint8_t>(p[i]), i, 0, 0};
    ++i;
    switch (op.code) {
      case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89: case 't': case 0x85: case 0x86:
      case 0x87: case 'e': case 'l': case 'd': case 'u': case '.': case 0x81: case 'b': case 'R': case 'Q': case 's':
        break;
      case 0x80: case 'K': i += 1; break;  // PROTO, BININT1
      case 'M': i += 2; break;              // BININT2
      case 'J': i += 4; break;              // BININT
      case 'G': i += 8; break;              // BINFLOAT
      case 'h': case 'q': op.memo = static_cast<uint32_t>(arg(1)); i += 1; break;
      case 'j': case 'r': op.memo = static_cast<uint32_t>(arg(4)); i += 4; break;
      case 0x8a: i += 1 + arg(1); break;    // LONG1
      case 'X': i += 4 + arg(4); break;     // BINUNICODE
      case 'c':                              // GLOBAL: module and name, newline-terminated
        for (int line = 0; line < 2; ++line) {
          const size_t newline = p.find('\n', i);
          if (newline == std::string::npos) throw Error("truncated pickle");
          i = newline + 1;
        }
        break;
      default:
        throw Error(concat("the pickle uses opcode 0x", std::hex, int(op.code), " at byte ", std::dec, op.begin,
                           ", which LibTorch's unpickler does not read; save with torch.save's default protocol"));
    }
    if (i > p.size()) throw Error("truncated pickle");
    op.end = i;
    ops.push_back(op);
  }
  return ops;
}

// Rewrites OrderedDict() as {} and drops the BUILD (with the ops that made its state) of every
// such dict. A light simulation of the unpickler's stack says which value each op touches: one
// flag per value (made by OrderedDict()), one per memo slot (1: the OrderedDict class, 2: such
// a dict), and the stack size and MARK count before each kept op, which locate where a dropped
// BUILD's state began (the last kept op at the object's depth).
std::string rewrite_pickle(const std::string& p) {
  const std::vector<Op> ops = tokenize(p);
  struct Kept {
    size_t op;  // index into ops, or npos for an inserted EMPTY_DICT
    size_t stack, marks;
  };
  std::vector<Kept> kept;
  std::vector<bool> stack;
  std::vector<size_t> marks;
  std::vector<int> memo;
  auto pop = [&](size_t n) {
    if (stack.size() < n) throw Error("malformed pickle: stack underflow");
    stack.resize(stack.size() - n);
  };
  auto to_mark = [&] {
    if (marks.empty()) throw Error("malformed pickle: no MARK");
    stack.resize(marks.back());
    marks.pop_back();
  };
  auto memo_at = [&](uint32_t i) -> int& {
    if (memo.size() <= i) memo.resize(i + 1, 0);
    return memo[i];
  };
  constexpr std::string_view kOrderedDict = "ccollections\nOrderedDict\n";
  for (size_t k = 0; k < ops.size(); ++k) {
    const Op& op = ops[k];
    const bool is_get = op.code == 'h' || op.code == 'j';
    if (std::string_view(p).substr(op.begin, op.end - op.begin) == kOrderedDict || (is_get && memo_at(op.memo) == 1)) {
      size_t j = k + 1;
      if (!is_get && j < ops.size() && (ops[j].code == 'q' || ops[j].code == 'r')) memo_at(ops[j++].memo) = 1;
      if (j + 1 >= ops.size() || ops[j].code != ')' || ops[j + 1].code != 'R')
        throw Error("the pickle uses collections.OrderedDict other than as OrderedDict()");
      kept.push_back({std::string::npos, stack.size(), marks.size()});
      stack.push_back(true);
      k = j + 1;
      continue;
    }
    if (op.code == 'b' && stack.size() >= 2 && stack[stack.size() - 2]) {
      pop(1);  // the state; the object stays
      while (!kept.empty() && !(kept.back().stack == stack.size() && kept.back().marks == marks.size()))
        kept.pop_back();
      if (kept.empty()) throw Error("malformed pickle: BUILD without a state");
      kept.pop_back();  // the op that pushed the state
      continue;
    }
    kept.push_back({k, stack.size(), marks.size()});
    switch (op.code) {
      case '(': marks.push_back(stack.size()); break;
      case 't': case 'l': case 'd': to_mark(); stack.push_back(false); break;
      case 'u': case 'e': to_mark(); break;
      case 'q': case 'r': memo_at(op.memo) = !stack.empty() && stack.back() ? 2 : 0; break;
      case 'h': case 'j': stack.push_back(memo_at(op.memo) == 2); break;
      case 0x80: case '.': break;
      case 'Q': case 0x85: pop(1); stack.push_back(false); break;
      case 'R': case 0x86: pop(2); stack.push_back(false); break;
      case 0x87: pop(3); stack.push_back(false); break;
      case 's': pop(2); break;
      case 'b': case 0x81: pop(1); break;
      default: stack.push_back(false);  // every other opcode tokenize() accepts pushes one value
    }
  }
  std::string out;
  for (const Kept& e : kept)
    e.op == std::string::npos ? void(out += '}') : void(out.append(p, ops[e.op].begin, ops[e.op].end - ops[e.op].begin));
  return out;
}

// A dict whose values are all tensors, or nullopt.
std::optional<Named> tensor_dict(const c10::IValue& value) {
  if (!value.isGenericDict()) return std::nullopt;
  Named out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) return std::nullopt;
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

// A torch.save / torch::pickle_save zip: "data.pkl" plus one record per storage, "data/<key>".
Named read_torch_zip(const std::filesystem::path& file) {
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  const auto [data, size] = reader.getRecord("data.pkl");
  const std::string pickle = rewrite_pickle(std::string(static_cast<const char*>(data.get()), size));
  size_t position = 0;
  torch::jit::Unpickler unpickler(
      [&](char* buffer, size_t n) {
        n = std::min(n, pickle.size() - position);
        std::memcpy(buffer, pickle.data() + position, n);
        position += n;
        return n;
      },
      /*type_resolver=*/nullptr, /*obj_loader=*/nullptr,
      [&](const std::string& key) { return std::get<0>(reader.getRecord("data/" + key)); },
      c10::Device(c10::kCPU));  // map_location="cpu": the copy into the model moves them
  unpickler.set_version(reader.version());
  const c10::IValue root = unpickler.parse_ivalue();
  if (auto state = tensor_dict(root)) return *state;
  if (root.isGenericDict()) {
    const auto dict = root.toGenericDict();
    if (dict.contains("model"))
      if (auto state = tensor_dict(dict.at("model"))) return *state;
  }
  throw Error("it holds neither a dict of tensors (a state_dict) nor a dict with a \"model\" dict of tensors "
              "(a host checkpoint)");
}

Named read_weights(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, "the file cannot be opened (missing or unreadable). Give a host checkpoint, a "
                      "torch.save(model.state_dict()) file or a .safetensors file, or \"\" for the model's own init.");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) {
      // The checks --resume makes, before LibTorch reads a byte: a host checkpoint's seal (a damaged
      // one is refused by name, exit 4) and, for any zip, that every record lies inside the file.
      verify_checkpoint(bytes.data(), bytes.size(), file.string());
      return read_torch_zip(file);
    }
    return read_safetensors(bytes);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) why = c10->what_without_backtrace();
    fail(file, "cannot read initial weights from it (" + why.substr(0, 300) +
                   "). Expected a host checkpoint, a torch.save(model.state_dict()) file (zip format, the default "
                   "since PyTorch 1.6) or a .safetensors file.");
  }
}

std::string first_few(const std::vector<std::string>& items) {
  constexpr size_t kShown = 5;
  std::string out;
  for (size_t i = 0; i < std::min(items.size(), kShown); ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > kShown) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out;
}

}  // namespace

void load_initial_weights(const std::filesystem::path& file, const std::vector<StateTensor>& model_state) {
  const Named saved = read_weights(file);
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : saved) by_name.emplace(name, &tensor);
  std::vector<std::string> missing, mis_shaped;
  std::vector<std::pair<const at::Tensor*, const at::Tensor*>> copies;  // (model tensor, file tensor)
  for (const auto& entry : model_state) {
    const auto it = by_name.find(entry.name);
    if (it == by_name.end()) {
      missing.push_back("'" + entry.name + "'");
      continue;
    }
    if (it->second->sizes() != entry.tensor.sizes())
      mis_shaped.push_back("'" + entry.name + "' " + c10::str(it->second->sizes()) + " in the file, " +
                           c10::str(entry.tensor.sizes()) + " in the model");
    copies.emplace_back(&entry.tensor, it->second);
    by_name.erase(it);
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : saved)
    if (by_name.count(name) != 0) unexpected.push_back("'" + name + "'");
  if (!missing.empty() || !unexpected.empty() || !mis_shaped.empty()) {
    std::string what = "the file does not match the model (strict, by parameter and buffer name):";
    if (!missing.empty()) what += " missing " + first_few(missing) + ";";
    if (!unexpected.empty()) what += " unexpected " + first_few(unexpected) + ";";
    if (!mis_shaped.empty()) what += " other shapes: " + first_few(mis_shaped) + ";";
    fail(file, what + " the model's names are listed by `host plugins check`. Save the state_dict of a module "
                      "built with the same structure and options as [model].");
  }
  at::NoGradGuard no_grad;
  for (const auto& [destination, source] : copies) destination->copy_(*source);
}

}  // namespace tp
