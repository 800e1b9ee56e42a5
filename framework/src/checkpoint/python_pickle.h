// Python's torch.save pickles as LibTorch's unpickler can read them, for the readers of files
// Python wrote: train.init_weights (initial_weights.cpp) and the note that names a foreign file
// given as a checkpoint (foreign_checkpoint.cpp). Internal to framework/src/checkpoint.
//
// LibTorch's unpickler reads what LibTorch's pickler writes: it has no APPEND, reads LONG1 of 8
// bytes only, knows only the globals of tensors, turns every collections.OrderedDict into None
// and treats BUILD as a call. torch.save writes much more: a state_dict is an OrderedDict with a
// _metadata attribute (pytorch#100741); a timm train.py checkpoint adds an optimizer state (its
// one-element lists are APPENDs) and an argparse.Namespace; a Lightning checkpoint adds callbacks'
// and loops' state and hyperparameters. readable_pickle rewrites the pickle at the opcode level so
// that LibTorch reads its dicts, lists, strings, numbers and tensors, and every other object
// becomes an opaque value (None, or a tuple of its parts) that no reader interprets.
//
// Nothing in a pickle is run: a global only names a class or function. The globals handed on to
// LibTorch are the ones it maps itself, to tensors, storages and devices; every other global is
// replaced by None before LibTorch sees it, and what is called, built or filled from it becomes
// opaque.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tp/framework/checkpoint/checkpoint.h"

namespace tp {

/// The key under which readable_pickle keeps, inside the dict, the BUILD state of a dict made from
/// collections.OrderedDict() (a state_dict's _metadata): LibTorch has no opcode that drops a
/// value, and the state may store memo entries that later parts of the pickle read. An int, where
/// a state_dict's names are strings; tensor_entries skips it.
inline constexpr int64_t kOrderedDictStateKey = -0x7470;

/// `pickle` (protocol 2, torch.save's default) rewritten so that LibTorch's unpickler reads it, as
/// the header says. Throws tp::Error for what it does not read, naming the opcode and its byte
/// (protocols 0, 1 and 3-5, POP, DUP, extension codes), a memo id no pickler writes, and a
/// malformed or truncated pickle. Cost: one pass, a few words of memory per opcode.
std::string readable_pickle(std::string_view pickle);

/// The entries of `value` when it is a dict of string keys and tensors, as readable_pickle leaves
/// a state_dict (kOrderedDictStateKey skipped), or nullopt. The tensors are unchecked: callers
/// check them with plain_stored_tensor before reading a byte.
std::optional<NamedWeights> tensor_entries(const c10::IValue& value);

/// The first eight string keys of `value` when it is a dict, each cut to 60 bytes and escaped
/// (escape_control_characters: they are the file's bytes, bound for the terminal and train.log),
/// ", "-separated; "" for anything else. For messages that show what a file holds instead.
std::string top_level_keys(const c10::IValue& value);

}  // namespace tp
