// The input fields a model reads, for run_tensors' names (serving trial F6). A model's plugin
// reads the fields it needs from the batch and never sees the others, so a tensor under a name
// the model does not read (a typo, a field of another model) was dropped without a word, and a
// second tensor of one name silently lost to the first.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {

/// The fields the validated model table `model` names as its inputs: its `input` option (a
/// string: small_cnn, resnet, mlp, ...) or `inputs` (a string array: two_stream, torchscript), the
/// convention of the built-in models; empty when it has neither (a plugin of its own naming).
std::vector<std::string> declared_inputs(const ComponentConfig& model);

/// Throws Error (BadInput) for two tensors of one name, or, where `declared` is not empty, a
/// tensor whose name is not in it: naming the tensor, its position and the model's inputs.
void check_input_names(const std::vector<Tensor>& inputs, const std::vector<std::string>& declared);

}  // namespace tp::infer::detail
