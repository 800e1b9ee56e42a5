#include "class_columns.h"

#include <ATen/ATen.h>

namespace tp::detail {
namespace {

// `argmax` with -1 where the row's best score is NaN: a NaN anywhere makes max() give index 0, and
// every image of a model with NaN weights was confidently class 0 (security trial F15).
at::Tensor no_class_where_nan(const at::Tensor& argmax, const at::Tensor& prob) {
  return at::where(prob.isnan(), at::full_like(argmax, -1), argmax);
}

}  // namespace

bool is_classification(const std::string& name, const at::Tensor& output) {
  const bool named = name == "logits" || (name.size() > 7 && name.ends_with("_logits"));
  return named && output.dim() == 2 && output.is_floating_point();
}

void append_class_columns(std::vector<std::pair<std::string, at::Tensor>>& columns, const std::string& name,
                          const at::Tensor& output, bool sigmoid_scores) {
  if (sigmoid_scores) {
    // Each label on its own (a binary cross entropy trained it): a softmax over labels that may
    // all be present would divide one probability among them.
    const at::Tensor sigmoid = output.to(at::kFloat).sigmoid();
    const auto [prob, argmax] = sigmoid.max(1);
    columns.emplace_back(name + ".argmax", no_class_where_nan(argmax, prob));
    columns.emplace_back(name + ".prob", prob);
    columns.emplace_back(name + ".sigmoid", sigmoid);
    columns.emplace_back(name + ".predicted", sigmoid.gt(0.5).to(at::kLong));
    return;
  }
  const auto [prob, argmax] = at::softmax(output.to(at::kFloat), 1).max(1);
  columns.emplace_back(name + ".argmax", no_class_where_nan(argmax, prob));
  columns.emplace_back(name + ".prob", prob);
}

}  // namespace tp::detail
