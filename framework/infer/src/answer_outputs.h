// A model's outputs as the library hands them out (tp::infer::Tensor: float32 on the CPU), with a
// segmenter's per-pixel outputs at the size of the image files they label, as `host predict`
// writes them (docs/deployment.md, "Segmentation: maps at each file's size").
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {

/// `tensor` copied to the CPU as float32 (integer outputs converted), named `name`.
Tensor host_tensor(const std::string& name, const at::Tensor& tensor);

/// The host tensors of the model's output `name` for `inputs`. With `files` (a batch run_files
/// read: collated with `layout`), a per-pixel output (tp::pixel_maps) becomes each file's map at
/// the file's size, stacked into [N, C, H, W] (or [N, H, W] ids) with H and W the largest file's,
/// each map at the top left and 0 beyond it, followed by "<name>_sizes" [N, 2]: each file's
/// (height, width). Any other output, and every output without `files`, as it is.
std::vector<Tensor> answer_outputs(const std::string& name, const at::Tensor& output, const NamedTensors& inputs,
                                   const BatchLayout* files);

}  // namespace tp::infer::detail
