// What changed between two resolved configurations (a checkpoint's and the resumed run's), key by
// key, for the warnings a resume prints: "train.batch_size: 16 -> 8" reads where two blocks of
// whole lines without their sections did not.
#pragma once

#include <string>
#include <vector>

namespace tp {

/// One line per dotted key whose value differs between the TOML texts `before` and `now`, in key
/// order: "key: old -> new", "key: value (new)" or "key: removed (was old)"; values as
/// TOML writes them, credentials in a URI redacted. Tables are walked to their leaves, arrays of
/// tables by element ("metrics[1].component"); another array is one value. Empty when both hold
/// the same values. A text that does not parse gives one line saying so.
std::vector<std::string> config_changes(const std::string& before, const std::string& now);

/// The lines of config_changes for keys set on both sides to different values that a resume from
/// a checkpoint made with `before` would record but not use: every [optim] key but
/// optim.implementation (the optimizer's options come back with its state) and every [schedule]
/// key (the schedule continues from its saved lrs and step). A key only one side has (a setting
/// added since) is not among them. Empty when nothing of the kind changed.
std::vector<std::string> changes_a_resume_ignores(const std::string& before, const std::string& now);

/// The lines of config_changes for keys that decide what a position inside an epoch (its batch
/// index) points at: train.batch_size. A resume in the middle of an epoch with another value would
/// skip or repeat samples, or point past the epoch's end; at an epoch's start it is free. Empty
/// when it did not change.
std::vector<std::string> changes_a_mid_epoch_resume_refuses(const std::string& before, const std::string& now);

}  // namespace tp
