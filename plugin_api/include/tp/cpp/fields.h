// torchhost C++ helpers for Tier T plugin authors: the named tensors a loss or a metric receives
// (the model's outputs and the batch's targets), found by name.
//
//   const at::Tensor& logits = outputs.get("logits");   // "no output named 'logits' (present: y)"
//   const at::Tensor& label = targets.get(target_);
//
// tp/cpp/loss_adapter.h and tp/cpp/metric_adapter.h hand both to the class; a model's forward
// gets its batch as tp::cpp::Inputs (tp/cpp/model_adapter.h), the same view with the role "input".
#ifndef TP_CPP_FIELDS_H
#define TP_CPP_FIELDS_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "tp/cpp/tensor.h"
#include "tp/iface/tensor.h"

namespace tp::cpp {

/// A borrowed array of named tensors (tp_named_tensor_t), valid for the call that received it.
class Fields {
 public:
  /// `role` (static storage: "output", "target") names the array in messages.
  Fields(const tp_named_tensor_t* fields, uint32_t count, const char* role) noexcept
      : fields_(fields), count_(count), role_(role) {}
  /// The tensor `name`; throws Failure(TP_ERR_INVALID_ARGUMENT) naming the role and listing the
  /// names present when it is missing.
  const at::Tensor& get(std::string_view name) const { return find(fields_, count_, name, role_); }
  const tp_named_tensor_t* data() const noexcept { return fields_; }
  uint32_t size() const noexcept { return count_; }

 private:
  const tp_named_tensor_t* fields_;
  uint32_t count_;
  const char* role_;
};

}  // namespace tp::cpp

#endif  // TP_CPP_FIELDS_H
