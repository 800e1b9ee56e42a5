// org.torchhost.fcos: the component's forward (fcos_model.h).
#include "fcos_model.h"

#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <c10/util/StringUtil.h>

#include <utility>

#include "tp/cpp/guard.h"

namespace tp::detection {
namespace {

/// GeneralizedRCNNTransform's size_divisible.
constexpr int64_t kSizeDivisible = 32;

constexpr const char* kClsLogits = "cls_logits";
constexpr const char* kBboxRegression = "bbox_regression";
constexpr const char* kBboxCtrness = "bbox_ctrness";
constexpr const char* kAnchors = "anchors";
constexpr const char* kNumAnchorsPerLevel = "num_anchors_per_level";

int64_t round_up(int64_t size) { return (size + kSizeDivisible - 1) / kSizeDivisible * kSizeDivisible; }

}  // namespace

FcosModel::FcosModel(const char* id, std::shared_ptr<FcosNet> net, FcosModelConfig config)
    : id_(id), net_(std::move(net)), config_(std::move(config)), lengths_(config_.input + "_lengths") {}

void FcosModel::misfit(const std::string& name, const std::string& expected, const at::Tensor& got) const {
  throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(id_) + ": input '" + name + "': expected " + expected +
                                                      ", got " + std::string(c10::toString(got.scalar_type())) + " " +
                                                      c10::str(got.sizes()));
}

const at::Tensor* FcosModel::optional_field(const tp::cpp::Inputs& inputs, const std::string& name) {
  for (uint32_t i = 0; i < inputs.size(); ++i)
    if (name == inputs.data()[i].name) return &tp::cpp::unwrap(inputs.data()[i].tensor);
  return nullptr;
}

const at::Tensor& FcosModel::image(const tp::cpp::Inputs& inputs) const {
  const at::Tensor& x = inputs.get(config_.input);
  if (x.dim() != 4 || x.size(1) != config_.in_channels || x.size(0) < 1 || x.size(2) < 1 || x.size(3) < 1 ||
      !x.is_floating_point())
    misfit(config_.input,
           "a floating [B, " + std::to_string(config_.in_channels) + ", H, W] image (in_channels = " +
               std::to_string(config_.in_channels) + ")",
           x);
  return x;
}

const at::Tensor* FcosModel::lengths_field(const tp::cpp::Inputs& inputs, int64_t batch) const {
  const at::Tensor* lengths = optional_field(inputs, lengths_);
  if (lengths != nullptr && (lengths->dim() != 2 || lengths->size(0) != batch || lengths->size(1) != 3 ||
                             lengths->is_floating_point() || lengths->scalar_type() == at::kBool))
    misfit(lengths_,
           "an integer [" + std::to_string(batch) + ", 3] tensor of each image's (C, H, W) (the loader's padding sizes "
           "of '" + config_.input + "')",
           *lengths);
  return lengths;
}

const at::Tensor* FcosModel::orig_size_field(const tp::cpp::Inputs& inputs, int64_t batch) const {
  const at::Tensor* orig = optional_field(inputs, config_.orig_size);
  if (orig != nullptr &&
      (orig->dim() != 2 || orig->size(0) != batch || orig->size(1) != 2 || orig->scalar_type() == at::kBool))
    misfit(config_.orig_size,
           "a [" + std::to_string(batch) + ", 2] tensor of each image's (height, width) before resizing", *orig);
  return orig;
}

std::vector<std::array<int64_t, 2>> FcosModel::image_sizes(const at::Tensor* lengths, const at::Tensor& x) const {
  const int64_t batch = x.size(0);
  if (lengths == nullptr) return std::vector<std::array<int64_t, 2>>(batch, {x.size(2), x.size(3)});
  const at::Tensor sizes = lengths->to(at::kCPU, at::kLong).contiguous();
  std::vector<std::array<int64_t, 2>> out;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t h = sizes[i][1].item<int64_t>(), w = sizes[i][2].item<int64_t>();
    if (h < 1 || w < 1 || h > x.size(2) || w > x.size(3))
      throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT,
                             std::string(id_) + ": input '" + lengths_ + "': image " + std::to_string(i) + " is " +
                                 std::to_string(h) + " x " + std::to_string(w) + ", outside the batch's " +
                                 std::to_string(x.size(2)) + " x " + std::to_string(x.size(3)));
    out.push_back({h, w});
  }
  return out;
}

std::vector<std::array<double, 2>> FcosModel::original_sizes(const at::Tensor* orig) {
  if (orig == nullptr) return {};
  const at::Tensor sizes = orig->to(at::kCPU, at::kDouble).contiguous();
  std::vector<std::array<double, 2>> out;
  for (int64_t i = 0; i < sizes.size(0); ++i) out.push_back({sizes[i][0].item<double>(), sizes[i][1].item<double>()});
  return out;
}

tp::cpp::Outputs FcosModel::forward(const tp::cpp::Inputs& inputs) {
  const at::Tensor& x = image(inputs);
  // Both checked in either mode, before the forward, so a wrong field fails fast; their values
  // are read (on the host) in eval mode only.
  const at::Tensor* lengths = lengths_field(inputs, x.size(0));
  const at::Tensor* orig = orig_size_field(inputs, x.size(0));
  const bool eval = !net_->is_training();
  std::vector<std::array<int64_t, 2>> sizes;
  std::vector<std::array<double, 2>> originals;
  if (eval) {
    sizes = image_sizes(lengths, x);
    originals = original_sizes(orig);
  }
  // batch_images: zeros to the right and below, up to a multiple of 32.
  const at::Tensor padded = at::constant_pad_nd(x.scalar_type() == dtype_ ? x : x.to(dtype_),
                                                {0, round_up(x.size(3)) - x.size(3), 0, round_up(x.size(2)) - x.size(2)},
                                                0);
  FcosForward f = net_->forward(padded);
  const int64_t batch = x.size(0);
  std::vector<at::Tensor> counts;
  const auto long_options = padded.options().dtype(at::kLong);
  // Fills on the device, not a copy from the host (which could wait for the stream).
  for (const int64_t n : f.num_anchors_per_level) counts.push_back(at::scalar_tensor(n, long_options));
  tp::cpp::Outputs outputs = {
      {kClsLogits, f.head.cls_logits},
      {kBboxRegression, f.head.bbox_regression},
      {kBboxCtrness, f.head.bbox_ctrness},
      {kAnchors, f.anchors.unsqueeze(0).expand({batch, -1, -1})},
      {kNumAnchorsPerLevel, at::stack(counts).unsqueeze(0).expand({batch, -1})},
  };
  if (!eval) return outputs;
  Detections d = postprocess_detections(f, sizes, originals, config_.postprocess);
  outputs.push_back({"detection_boxes", std::move(d.boxes)});
  outputs.push_back({"detection_boxes_offsets", d.offsets});
  outputs.push_back({"detection_scores", std::move(d.scores)});
  outputs.push_back({"detection_scores_offsets", d.offsets});
  outputs.push_back({"detection_labels", std::move(d.labels)});
  outputs.push_back({"detection_labels_offsets", std::move(d.offsets)});
  return outputs;
}

}  // namespace tp::detection
