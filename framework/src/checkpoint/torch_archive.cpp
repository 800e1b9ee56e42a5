#include "torch_archive.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/versions.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "pickle_walk.h"

namespace tp {
namespace {

// LibTorch's unpickler allocates (and zero-fills) a string or bytes object of the length its
// opcode claims before it reads the data, so a pickle claiming 4 GB costs 4 GB and seconds of
// memset before "Unexpected end of pickler archive"; likewise it resizes its memo table to any
// memo id a BINPUT names (26 GB for one forged id). Both found by the checkpoint fuzzer, torch
// 2.13. This walks the opcodes (pickle_walk.h) and refuses a length longer than what is left and
// a memo id no pickler could have reached. At an opcode LibTorch's pickler never writes, or a
// cut-off argument, it stops checking and lets LibTorch decide, so it can never refuse a pickle
// LibTorch would read.
void check_pickle_lengths(const char* data, std::size_t size, const ArchiveLabel& label) {
  const PickleWalkEnd end = walk_pickle(std::string_view(data, size), PickleOpcodes::kAny,
                                        [](const PickleOp& op) { return op.code != '.'; });  // STOP
  const std::string advice = ". " + label.advice;
  switch (end.kind) {
    case PickleWalkEnd::kForgedMemo:
      throw CheckpointError(label.subject + " is damaged: its pickle stores memo entry " + std::to_string(end.value) +
                            " at byte " + std::to_string(end.at) + advice);
    case PickleWalkEnd::kLengthPastEnd:
      throw CheckpointError(label.subject + " is damaged: its pickle claims a " + std::to_string(end.value) +
                            "-byte value with " + std::to_string(end.left) + " bytes left" + advice);
    case PickleWalkEnd::kUnterminatedGlobal:
      // Refused, not left to LibTorch: its readString searches its whole 256-byte buffer for the
      // newline, including stale bytes past the end of the pickle, finds one there and wraps its
      // remaining-bytes count below zero; every later length then "fits" (an 8 EB string
      // allocation in the CI fuzz run, stop 9; tests/fuzz/corpus/checkpoint/
      // regression_oom_unterminated_global.bin).
      throw CheckpointError(label.subject + " is damaged: its pickle names a global at byte " + std::to_string(end.at) +
                            " that never ends" + advice);
    case PickleWalkEnd::kDone:
    case PickleWalkEnd::kUnknownOpcode:
    case PickleWalkEnd::kTruncated:
      return;  // LibTorch's own checks apply
  }
}

// The archive's bytes already in memory, as LibTorch's zip reader wants them: the file is opened
// and read once, so what was checked is what is read.
class BufferReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BufferReader(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - static_cast<size_t>(pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<char>& bytes_;
};

// The dtypes a stored weight may have: the plain numeric ones LibTorch's copy_ converts on the
// CPU. A pickle can name any storage class (torch.UInt3Storage, bits and quantized types), and
// copy_ from such a tensor throws inside its CPU kernel, where the exception ends in
// std::terminate (SIGABRT; found by the initial_weights fuzzer, torch 2.13,
// tests/fuzz/corpus/initial_weights/regression_abort_uint3_storage.pt).
bool copyable_dtype(at::ScalarType type) {
  switch (type) {
    case at::kDouble: case at::kFloat: case at::kHalf: case at::kBFloat16:
    case at::kLong: case at::kInt: case at::kShort: case at::kChar: case at::kByte: case at::kBool:
      return true;
    default:
      return false;
  }
}

}  // namespace

void check_torch_layout(const std::vector<char>& bytes, const std::vector<ZipRecord>& records,
                        const ArchiveLabel& label) {
  auto fail = [&](const std::string& what) {
    throw CheckpointError(label.subject + " is not a PyTorch archive: " + what + ". " + label.advice);
  };
  if (records.empty()) fail("it holds no records");
  const std::size_t slash = records.front().name.find('/');
  if (slash == std::string::npos) fail("its first record is not in a folder");
  const std::string folder = records.front().name.substr(0, slash + 1);
  // LibTorch looks records up case-insensitively and may pick any of several equal names, so
  // every record that could be the one it reads is checked.
  auto same = [](const std::string& a, const std::string& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  auto find_all = [&](const std::string& record) {
    std::vector<const ZipRecord*> out;
    for (const ZipRecord& r : records)
      if (same(r.name, folder + record)) out.push_back(&r);
    return out;
  };
  std::vector<const ZipRecord*> versions = find_all(".data/version");
  if (versions.empty()) versions = find_all("version");
  const std::vector<const ZipRecord*> pickles = find_all("data.pkl");
  if (versions.empty() || pickles.empty()) fail("it lacks its version or data.pkl record");
  for (const ZipRecord* pickle : pickles) check_pickle_lengths(bytes.data() + pickle->offset, pickle->size, label);
  for (const ZipRecord* version : versions) {
    std::string text(bytes.data() + version->offset, version->size);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    const bool digits = !text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos;
    const uint64_t number = digits ? std::stoull(text) : 0;
    if (number < caffe2::serialize::kMinSupportedFileFormatVersion ||
        number > caffe2::serialize::kMaxSupportedFileFormatVersion)
      fail("its format version '" + text.substr(0, 20) + "' is not one this LibTorch reads");
  }
}

c10::IValue unpickle_archive(const std::vector<char>& bytes, RecordSizes& records, const PickleRewrite& rewrite) {
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BufferReader>(bytes));
  const auto record = reader.getRecord("data.pkl");
  std::string_view pickle(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
  std::string rewritten;
  if (rewrite) {
    rewritten = rewrite(pickle);
    pickle = rewritten;
  }
  size_t position = 0;
  torch::jit::Unpickler unpickler(
      [&](char* buffer, size_t n) {
        n = std::min(n, pickle.size() - position);
        if (n > 0) std::memcpy(buffer, pickle.data() + position, n);  // an empty data.pkl has data == nullptr
        position += n;
        return n;
      },
      /*type_resolver=*/nullptr, /*obj_loader=*/nullptr,
      [&](const std::string& key) {
        auto [data, size] = reader.getRecord("data/" + key);
        records[data.get()] = size;
        return std::move(data);
      },
      c10::Device(c10::kCPU));  // map_location="cpu": callers move tensors where they need them
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

bool within_storage(const at::Tensor& t, const RecordSizes& records) {
  if (!t.has_storage()) return false;
  const auto record = records.find(t.storage().data());
  if (record == records.end()) return t.numel() == 0;
  if (t.numel() == 0) return true;
  int64_t last = t.storage_offset();
  if (last < 0) return false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    // Sizes and strides come from the pickle: checked, not trusted, and never overflowed.
    int64_t reach = 0;
    if (t.stride(d) < 0 || __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &reach) ||
        __builtin_add_overflow(last, reach, &last) || last > (int64_t{1} << 50))
      return false;
  }
  const uint64_t needed = static_cast<uint64_t>(last + 1) * static_cast<uint64_t>(t.element_size());
  return needed <= t.storage().nbytes() && needed <= record->second;
}

bool plain_stored_tensor(const at::Tensor& t, const RecordSizes& records) {
  return t.defined() && t.layout() == at::kStrided && t.device().is_cpu() && !t.is_quantized() &&
         copyable_dtype(t.scalar_type()) && within_storage(t, records);
}

}  // namespace tp
