// Adaptive gradient clipping (adaptive_clip.h): timm 1.0.31's timm/utils/agc.py op for op, so
// that on the CPU the same gradients are clipped to the same bits (agc_timm_oracle measures it).
#include "tp/framework/optim/adaptive_clip.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "tp/framework/error.h"
#include "tp/framework/util/name_pattern.h"

namespace tp {

at::Tensor unitwise_norm(const at::Tensor& x, double norm_type) {
  // timm calls Tensor.norm, which torch.norm sends to linalg.vector_norm for strided CPU and
  // CUDA tensors; called directly here for the same kernel.
  if (x.dim() <= 1) return at::linalg_vector_norm(x, norm_type);
  std::vector<int64_t> dims(static_cast<size_t>(x.dim() - 1));
  std::iota(dims.begin(), dims.end(), 1);
  return at::linalg_vector_norm(x, norm_type, dims, /*keepdim=*/true);
}

void adaptive_clip_grad(const std::vector<at::Tensor>& params, double clip_factor, double norm_type, double eps) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : params) {
    if (!p.grad().defined()) continue;
    const at::Tensor g = p.grad().detach();
    const at::Tensor max_norm = unitwise_norm(p.detach(), norm_type).clamp_(eps).mul_(clip_factor);
    const at::Tensor grad_norm = unitwise_norm(g, norm_type);
    // The 1e-6 floor keeps a zero gradient's division finite; the where keeps that unit as it is.
    const at::Tensor clipped = g * (max_norm / grad_norm.clamp(1e-6));
    // Computed out of place and copied back, as timm does: the optimizer and the fp16 scaler
    // hold these very .grad tensors.
    p.grad().detach().copy_(at::where(grad_norm < max_norm, g, clipped));
  }
}

std::vector<at::Tensor> agc_parameters(const std::vector<StateTensor>& model_state,
                                       const std::vector<std::string>& ignore) {
  std::vector<at::Tensor> out;
  std::vector<std::string> names;
  std::vector<bool> used(ignore.size(), false);
  for (const StateTensor& entry : model_state) {
    if (entry.is_buffer) continue;
    names.push_back(entry.name);
    bool ignored = false;
    for (size_t i = 0; i < ignore.size(); ++i)
      if (name_matches(ignore[i], entry.name)) ignored = used[i] = true;
    if (!ignored) out.push_back(entry.tensor);
  }
  for (size_t i = 0; i < ignore.size(); ++i) {
    if (used[i]) continue;
    // The names, so the glob can be written from the message alone (ResNet-50 has 161).
    constexpr size_t kShown = 200;
    std::string listed;
    for (size_t k = 0; k < std::min(names.size(), kShown); ++k) listed += (k ? ", '" : "'") + names[k] + "'";
    if (names.size() > kShown) listed += ", ... (" + std::to_string(names.size()) + " in all)";
    const std::string key = "train.agc_ignore[" + std::to_string(i) + "]";
    throw ConfigError(key, key + " = \"" + ignore[i] + "\" matches no parameter of the model, so adaptive gradient "
                               "clipping would leave nothing out for it. The model's parameters: " + listed +
                               ". A glob covers the whole name (`*` also crosses dots), e.g. \"fc.*\" for the "
                               "classifier head timm's train.py leaves unclipped.");
  }
  return out;
}

}  // namespace tp
