// Non-finite weights (finite_weights.h): one foreach max-abs pass, no host read.
#include "engine/training/finite_weights.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace tp {

at::Tensor all_finite(const std::vector<StateTensor>& state) {
  c10::NoGradGuard no_grad;
  // Grouped by device and dtype, as foreach ops need.
  struct Group {
    c10::Device device;
    at::ScalarType dtype;
    std::vector<at::Tensor> tensors;
  };
  std::vector<Group> groups;
  std::optional<c10::Device> device;
  for (const auto& s : state) {
    if (!s.tensor.defined()) continue;
    if (!device) device = s.tensor.device();
    if (!s.tensor.is_floating_point() || s.tensor.numel() == 0) continue;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.device == s.tensor.device() && g.dtype == s.tensor.scalar_type();
    });
    if (group == groups.end()) group = groups.insert(groups.end(), Group{s.tensor.device(), s.tensor.scalar_type(), {}});
    group->tensors.push_back(s.tensor.detach());
  }
  at::Tensor finite = at::ones({}, at::TensorOptions().dtype(at::kBool).device(device.value_or(c10::Device(c10::kCPU))));
  for (const Group& group : groups) {
    at::Tensor reduced;
    if (group.device.is_cpu()) {
      // A sum per tensor: inf and NaN propagate into it, and it streams at memory speed (the
      // foreach max-abs norm has no fused CPU kernel and is ten times slower here). A sum of
      // finite values beyond the dtype's range reads as non-finite: weights that large have
      // diverged anyway, and a save confirms with exactly_finite() before refusing.
      std::vector<at::Tensor> sums;
      sums.reserve(group.tensors.size());
      for (const at::Tensor& t : group.tensors) sums.push_back(t.sum(at::kFloat));
      reduced = at::stack(sums);
    } else {
      // One fused multi-tensor kernel: the max-abs norm is inf or NaN exactly when an element is.
      reduced = at::stack(at::_foreach_norm(group.tensors, std::numeric_limits<double>::infinity(), at::kFloat));
    }
    finite = finite & reduced.isfinite().all().to(finite.device());
  }
  return finite;
}

bool exactly_finite(const std::vector<StateTensor>& state) {
  c10::NoGradGuard no_grad;
  for (const auto& s : state)
    if (s.tensor.defined() && s.tensor.is_floating_point() && !s.tensor.detach().isfinite().all().item<bool>()) return false;
  return true;
}

void FiniteWeightsWatch::observe(const std::vector<StateTensor>& state, int64_t step) {
  finite_ = all_finite(state);
  if (!first_bad_step_.defined()) first_bad_step_ = at::full({}, -1, finite_.options().dtype(at::kLong));
  // The first bad step stays: later steps only fill it while it is still -1.
  const at::Tensor first_now = (first_bad_step_ < 0) & finite_.logical_not();
  first_bad_step_ = at::where(first_now, at::full({}, step, first_bad_step_.options()), first_bad_step_);
}

int64_t FiniteWeightsWatch::first_non_finite_step() const {
  return first_bad_step_.defined() ? first_bad_step_.item<int64_t>() : -1;
}

}  // namespace tp
