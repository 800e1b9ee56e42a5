// The columns `host predict` derives from a classifier's scores: the predicted class and its
// probability (and, for a multi-label model, each label's sigmoid and whether it is predicted).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace tp::detail {

/// Whether `output` holds class scores, one row per sample: named "logits" or "<x>_logits",
/// floating, [N, C].
bool is_classification(const std::string& name, const at::Tensor& output);

/// Appends `name`.argmax and `name`.prob (the softmax probability of the argmax) for the class
/// scores `output`; with `sigmoid_scores` (a model trained with a binary cross entropy: each label
/// on its own) the sigmoid's argmax and probability, `name`.sigmoid and `name`.predicted (sigmoid
/// above 0.5) instead. The argmax is -1, which names no class, where the row's best score is NaN.
void append_class_columns(std::vector<std::pair<std::string, at::Tensor>>& columns, const std::string& name,
                          const at::Tensor& output, bool sigmoid_scores);

}  // namespace tp::detail
