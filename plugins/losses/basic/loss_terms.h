// basic_losses: the loss terms the four components share, and the glue that turns a Loss into a
// tp_loss_v1_t table.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/tensor.h"
#include "tp/entry.h"
#include "tp/iface/loss.h"

namespace tp::losses {

/// The terms a component (or one entry of weighted_sum) can compute.
enum class Term { kCrossEntropy, kMse, kSmoothL1 };

/// Term named "cross_entropy", "mse" or "smooth_l1"; throws tp::cpp::Failure(TP_ERR_CONFIG)
/// naming `component` and the accepted names otherwise.
Term term_from_name(const std::string& name, const char* component);

/// Options of the terms; each term reads only its own.
struct TermOptions {
  double label_smoothing = 0.0;  // cross_entropy, in [0, 1]
  double beta = 1.0;             // smooth_l1, > 0
};

/// The sum over samples of one term (differentiable, 0-dim, on output's device). Per-sample loss:
/// cross_entropy of the sample's logits (mean over positions for [B, C, d...] logits); mse and
/// smooth_l1 the mean over the sample's elements. Targets of another shape are an error (no
/// broadcasting), named by `output_name` / `target_name`. Never synchronizes.
at::Tensor per_sample_sum(Term term, const at::Tensor& output, const at::Tensor& target,
                          const TermOptions& options, const std::string& output_name,
                          const std::string& target_name);

/// A 0-dim int64 tensor holding `count` on `device`, created without a device sync.
at::Tensor count_tensor(int64_t count, const at::Device& device);

/// One loss component instance: returns {loss_sum, item_count}.
class Loss {
 public:
  virtual ~Loss() = default;
  /// Both arrays borrowed for the call; throws tp::cpp::Failure naming a missing field.
  virtual std::pair<at::Tensor, at::Tensor> forward(const tp_named_tensor_t* outputs, uint32_t output_count,
                                                    const tp_named_tensor_t* targets,
                                                    uint32_t target_count) = 0;
  /// The named terms of the last forward(): (name, detached 0-dim sum) adding up to its loss sum;
  /// names valid until destruction. Empty for a single-term loss (its total is its only term).
  virtual std::vector<std::pair<const std::string*, at::Tensor>> terms() const { return {}; }
};

/// Builds a loss from its validated config; throws tp::cpp::Failure(TP_ERR_CONFIG).
using LossFactory = std::unique_ptr<Loss> (*)(const tp::cpp::ConfigReader& cfg);

std::unique_ptr<Loss> make_weighted_sum(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kWeightedSumDescriptor;

}  // namespace tp::losses
