// org.torchhost.fcos_loss: torchvision 0.29's FCOS loss (FCOS.compute_loss, FCOSHead.compute_loss)
// as a loss component for tp/cpp/loss_adapter.h. It reads org.torchhost.fcos's training outputs
// and the batch's ragged targets, and never synchronises the device: the matching is batched
// (fcos_matcher.h) and torchvision's boolean-mask selections of the foreground are masked sums.
//
// Returned: sum = the focal loss summed over every location and class + the GIoU loss and the
// centre-ness BCE summed over the foreground; count = max(1, number of foreground locations), so
// the host's sum / count is torchvision's loss-dict total for the batch. Named terms
// "classification", "bbox_regression", "bbox_ctrness": the three sums.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "tp/cpp/fields.h"
#include "tp/cpp/loss_adapter.h"

namespace tp::detection {

/// The loss's settings (config keys of the same names).
struct FcosLossConfig {
  std::string boxes = "boxes";    ///< ragged [sum N_i, 4] (x1, y1, x2, y2) in input pixels, with "<boxes>_offsets"
  std::string labels = "labels";  ///< ragged integer [sum N_i] in [0, num_classes), with "<labels>_offsets"
  double center_sampling_radius = 1.5;
};

/// The three sums of one batch and the foreground count, all 0-dim on the outputs' device.
struct FcosLossParts {
  at::Tensor classification;   ///< sigmoid focal loss (alpha 0.25, gamma 2), summed
  at::Tensor bbox_regression;  ///< GIoU loss of the decoded boxes, summed over the foreground
  at::Tensor bbox_ctrness;     ///< BCE with logits of the centre-ness, summed over the foreground
  at::Tensor num_foreground;   ///< int64
};

/// FCOSHead.compute_loss given the assignment `matched` ([B, A] rows of `boxes`, -1 background,
/// fcos_matcher.h): the outputs [B, A, K], [B, A, 4], [B, A, 1], the anchors [B, A, 4], the
/// batch's boxes [M, 4] and integer labels [M].
FcosLossParts fcos_head_loss(const at::Tensor& cls_logits, const at::Tensor& bbox_regression,
                             const at::Tensor& bbox_ctrness, const at::Tensor& anchors, const at::Tensor& boxes,
                             const at::Tensor& labels, const at::Tensor& matched);

/// The component.
class FcosLoss {
 public:
  /// `id` (static storage) names the component in messages.
  FcosLoss(const char* id, FcosLossConfig config);
  /// [main] Throws Failure(TP_ERR_INVALID_ARGUMENT) naming a missing field, or a field whose
  /// dtype or shape does not fit (expected and actual), or a label outside [0, K) of the model's
  /// K classes (it would train as background). Label values are read on the host: every batch
  /// whose labels are on the CPU, the first batch on a device (reading there synchronises; the
  /// matching and the loss never do).
  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets);
  /// The three sums of the last forward, detached.
  std::vector<tp::cpp::LossTerm> terms() const;
  /// ABI 1.9: the boxes are (x1, y1, x2, y2) rows, the labels class ids (>= 0; the class count
  /// is the model's); "bbox_ctrness" has a floor above zero (BCE against soft targets).
  const tp::cpp::LossDescription& description() const noexcept { return description_; }

 private:
  /// Failure(TP_ERR_INVALID_ARGUMENT): "<id>: <role> '<name>': expected <what>, got <dtype> <shape>".
  [[noreturn]] void misfit(const char* role, const std::string& name, const std::string& expected,
                           const at::Tensor& got) const;
  /// Failure(TP_ERR_INVALID_ARGUMENT) naming the first label outside [0, `num_classes`).
  void check_label_range(const at::Tensor& labels, int64_t num_classes) const;
  /// Failure(TP_ERR_INVALID_ARGUMENT) when a box has x2 <= x1, y2 <= y1 or a non-finite corner:
  /// how many, the first one's sample and values, and "did you give x, y, w, h?" (torchvision's
  /// detectors refuse such boxes as well). `offsets`: the boxes' ragged offsets, [B + 1].
  void check_boxes(const at::Tensor& boxes, const at::Tensor& offsets) const;

  const char* id_;
  FcosLossConfig config_;
  std::string boxes_offsets_, labels_offsets_;
  bool labels_checked_ = false; ///< a batch's label values were read (check_label_range)
  bool boxes_checked_ = false;  ///< a batch's boxes were read (check_boxes)
  FcosLossParts last_;
  tp::cpp::LossDescription description_;
};

}  // namespace tp::detection
