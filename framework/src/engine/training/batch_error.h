// When a model, loss or metric fails on a batch, the error says which component, in which phase,
// and which fields it received ("targets: label float32[64]"): a dtype or shape mismatch between
// a dataset and a component then reads as one, instead of LibTorch's bare "mat1 and mat2 shapes
// cannot be multiplied". The annotation is built in the exception path only; a step that does not
// throw pays nothing (docs/plugins.md, "When a component fails on a batch").
#pragma once

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/data/sample_source.h"

namespace tp {

/// One group of fields a component received, as the message lists it: "inputs", "outputs" or
/// "targets" and the tensors (borrowed for the call to rethrow_batch_error).
struct FieldGroup {
  const char* role;
  const NamedTensors* fields;
};

/// What was running when a batch failed. Built only once a call has thrown.
struct BatchFailure {
  std::string role;       ///< "model", "loss" or "metric"
  std::string component;  ///< the component id
  std::string call;       ///< "forward", "update"
  std::string phase;      ///< "training step 3 (epoch 1, batch 3)", "evaluation 'val' (batch 2)"
  std::string table;      ///< the config table that chose the component and names its fields: "[loss]"
  std::vector<FieldGroup> groups;
};

/// "image float32[64, 3, 32, 32], label int64[64]"; "(none)" for no fields.
std::string describe_fields(const NamedTensors& fields);

/// `message` without the C++ backtrace LibTorch may append to it ("Exception raised from ... at
/// file:line (most recent call first):" and the "frame #N:" lines), and without trailing blanks.
std::string without_backtrace(const std::string& message);

/// Rethrows `error` with `where` appended to its message: the role, component, phase, the fields
/// of every group, and what to check. A PluginError stays a PluginError (same component, function
/// and status: the exit code and train.on_oom see the same error); a c10::Error or any other
/// std::exception becomes a PluginError of the component (exit 1), its message without
/// backtrace. Out-of-memory errors and the host's own tp::Error (a ConfigError, a non-finite
/// loss) are rethrown unchanged: they have handling and exit codes of their own.
[[noreturn]] void rethrow_batch_error(const std::exception_ptr& error, const BatchFailure& where);

/// Runs `call()` and returns its result; when it throws, rethrows through rethrow_batch_error with
/// the BatchFailure `describe()` returns, so the description is built only on the error path.
///
/// Example:
///   const NamedTensors outputs = with_batch_context([&] { return model.forward(batch); },
///                                                   [&] { return BatchFailure{"model", ...}; });
template <typename Call, typename Describe>
decltype(auto) with_batch_context(Call&& call, Describe&& describe) {
  try {
    return std::forward<Call>(call)();
  } catch (...) {
    rethrow_batch_error(std::current_exception(), std::forward<Describe>(describe)());
  }
}

}  // namespace tp
