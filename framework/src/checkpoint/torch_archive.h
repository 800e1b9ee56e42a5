// Reading a PyTorch zip archive (torch.save, torch::pickle_save) from untrusted bytes, shared by
// the two readers that take such files from users: the checkpoint reader (checkpoint.cpp: --resume,
// `host eval`, `host export`) and the initial-weights reader (initial_weights.cpp:
// train.init_weights). LibTorch's zip reader and unpickler trust the file: they leak or allocate
// what a forged length claims, and build tensors from the pickle's sizes and strides whatever the
// bytes of their storage record. These checks run around them so that both readers refuse a
// hostile file with a message instead of reading past a buffer (docs/hardening.md, sections 5
// and 8). Internal to framework/src/checkpoint.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tp/framework/checkpoint/checkpoint_seal.h"

namespace tp {

/// How a reader's messages name the archive and what they advise, e.g. {"checkpoint last.pt",
/// "Use another checkpoint, e.g. checkpoints/best.pt."}.
struct ArchiveLabel {
  std::string subject;  ///< begins every message: "checkpoint <file>", "train.init_weights = \"<file>\""
  std::string advice;   ///< the message's last sentence: what to do instead
};

/// The bytes each storage of an unpickled archive really has: record data pointer -> record size.
using RecordSizes = std::map<const void*, std::size_t>;

/// Checks first what LibTorch's zip reader (PyTorchStreamReader) checks in its constructor (one
/// folder, a `version` record within LibTorch's supported range, a `data.pkl` record), and that
/// data.pkl claims no length or memo id beyond its bytes. `records` is what verify_checkpoint()
/// found. Throws CheckpointError naming `label.subject`. Why: that constructor leaks its zip
/// state when it throws, and the unpickler allocates whatever a forged length claims (both found
/// by the checkpoint fuzzer, torch 2.13).
void check_torch_layout(const std::vector<char>& bytes, const std::vector<ZipRecord>& records,
                        const ArchiveLabel& label);

/// Rewrites a pickle before LibTorch's unpickler reads it (python_pickle.h's readable_pickle, for
/// the files Python writes); may throw tp::Error.
using PickleRewrite = std::function<std::string(std::string_view pickle)>;

/// torch::pickle_load of `bytes` (already checked by check_torch_layout), on the CPU, recording
/// the real size of every storage record it reads into `records` (for within_storage). `rewrite`,
/// when given, is applied to data.pkl first. Throws c10::Error or tp::Error for what LibTorch or
/// `rewrite` refuse.
c10::IValue unpickle_archive(const std::vector<char>& bytes, RecordSizes& records, const PickleRewrite& rewrite = {});

/// Whether every element of `t` lies inside the bytes its storage record really has (`records`
/// from unpickle_archive). LibTorch's unpickler sizes a storage by the element count the pickle
/// states, not by its record, so a tensor may claim more than its data holds; reading it would
/// run past the buffer. Every tensor taken from an archive is checked before anything reads it.
bool within_storage(const at::Tensor& t, const RecordSizes& records);

/// Whether `t` is a tensor a reader may take bytes from or copy into a model: defined, dense
/// (strided), on the CPU, not quantized, of a plain numeric dtype (float64/32/16, bfloat16,
/// int64/32/16/8, uint8, bool), and within_storage. A pickle can describe meta, sparse or
/// quantized tensors, whose data_ptr() is not a buffer of numel() elements, and sub-byte or bits
/// dtypes that copy_ aborts the process on.
bool plain_stored_tensor(const at::Tensor& t, const RecordSizes& records);

}  // namespace tp
